#!/bin/sh
# build.sh NAME [OUTDIR] builds ./cmd/NAME into OUTDIR/NAME (default bin/).
#
# The one build command of the project: the Makefile and the Dockerfile's
# build stages both call this script, so local binaries and image binaries
# are built the same way (static, no cgo, reproducible paths, stripped).
# GOOS and GOARCH from the environment select the target platform.
#
# The version and commit are stamped into internal/buildinfo (extproc
# --version, the mcp_extproc_build_info metric). VERSION and COMMIT from the
# environment win (the Dockerfile passes them: its build context has no
# .git); else they come from git: `git describe --tags --always --dirty`
# (the release tag, or tag-N-gHASH after it, or the short hash before the
# first tag; -dirty for uncommitted changes) and `git rev-parse HEAD`.
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 NAME [OUTDIR]" >&2
	exit 2
fi
name=$1
out=${2:-bin}
pkg=github.com/mcp-extproc/mcp-extproc/internal/buildinfo
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
commit=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X $pkg.version=$version -X $pkg.commit=$commit" -o "$out/$name" "./cmd/$name"
