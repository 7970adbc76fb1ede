#!/bin/sh
# build.sh NAME [OUTDIR] builds ./cmd/NAME into OUTDIR/NAME (default bin/).
#
# The one build command of the project: the Makefile and the Dockerfile's
# build stages both call this script, so local binaries and image binaries
# are built the same way (static, no cgo, reproducible paths, stripped).
# GOOS and GOARCH from the environment select the target platform.
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 NAME [OUTDIR]" >&2
	exit 2
fi
name=$1
out=${2:-bin}
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$out/$name" "./cmd/$name"
