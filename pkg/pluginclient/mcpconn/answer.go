package mcpconn

import (
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
)

// answered reports whether err is the server's answer to the call (as
// opposed to no answer at all): a JSON-RPC error, a refusal, a reply that
// is not a valid invoke_hook reply, or anything after a whole JSON body
// arrived.
func answered(err error, ex *callRecord) bool {
	return ex.answered.Load() || serverError(err) ||
		errors.Is(err, cpex.ErrInvalidReply) || errors.Is(err, wireconn.ErrRefused)
}

// answerError is the call's error for an answer: an answer that is neither
// a JSON-RPC error nor a refusal could not be understood, hence invalid.
func answerError(err error) error {
	if serverError(err) || errors.Is(err, cpex.ErrInvalidReply) || errors.Is(err, wireconn.ErrRefused) {
		return err
	}
	return fmt.Errorf("%w: %w", cpex.ErrInvalidReply, err)
}

// sdkCodes are the codes of the go-sdk's own jsonrpc.Error values (client
// closing, server closing, rejected by transport): errors made on this side
// of the wire, not answers.
var sdkCodes = map[int64]bool{-32003: true, -32004: true, -32005: true}

// serverError reports whether err's tree holds a JSON-RPC error the server
// sent.
func serverError(err error) bool {
	var we *jsonrpc.Error
	if errors.As(err, &we) && !sdkCodes[we.Code] {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if serverError(e) {
				return true
			}
		}
	case interface{ Unwrap() error }:
		return serverError(u.Unwrap())
	}
	return false
}
