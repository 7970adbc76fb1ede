# `make proto` regenerates the Go code of pkg/cpexpb from proto/cpex.proto.
# The generated files are committed, so `make test` and builds never need
# protoc. Needs protoc (Debian: apt-get install protobuf-compiler); the two
# Go plugins are installed at the versions below (protoc-gen-go matches
# google.golang.org/protobuf in go.mod) into $(PROTO_BIN).
PROTOC              ?= protoc
PROTO_BIN           ?= $(CURDIR)/bin/protoc-plugins
PROTOC_GEN_GO       := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC  := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
CPEXPB              := pkg/cpexpb

.PHONY: proto
proto: ## regenerate pkg/cpexpb from its .proto (needs protoc)
	GOBIN=$(PROTO_BIN) $(GO) install $(PROTOC_GEN_GO)
	GOBIN=$(PROTO_BIN) $(GO) install $(PROTOC_GEN_GO_GRPC)
	PATH="$(PROTO_BIN):$$PATH" $(PROTOC) -I $(CPEXPB)/proto \
		--go_out=$(CPEXPB) --go_opt=paths=source_relative \
		--go-grpc_out=$(CPEXPB) --go-grpc_opt=paths=source_relative \
		$(CPEXPB)/proto/cpex.proto
