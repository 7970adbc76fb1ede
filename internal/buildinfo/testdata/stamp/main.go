// Command stamp prints buildinfo.String, for the build script's test.
package main

import (
	"fmt"

	"github.com/mcp-extproc/mcp-extproc/internal/buildinfo"
)

func main() { fmt.Print(buildinfo.String("stamp")) }
