package mcpecho

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TransferTool is the stateless server's tool whose "account" argument is
// mirrored into the Mcp-Param-Account header (x-mcp-header "Account").
const (
	TransferTool  = "transfer"
	AccountHeader = "Mcp-Param-Account"
)

// transferSchema is the input schema of TransferTool; the annotation makes a
// 2026-07-28 client send the account as a header and the server check it.
var transferSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"account":{"type":"string","description":"the account to debit","x-mcp-header":"Account"},` +
	`"amount":{"type":"integer"}},"required":["account"]}`)

// TransferArgs are TransferTool's arguments.
type TransferArgs struct {
	Account string `json:"account"`
	Amount  int    `json:"amount"`
}

// NewStatelessServer returns NewServer plus TransferTool, whose result
// repeats what the server saw in the body and in the Mcp-Param-Account
// header: "transfer <amount> from <account> (header <value>)".
func NewStatelessServer() *mcp.Server {
	s := NewServer()
	s.AddTool(&mcp.Tool{Name: TransferTool, Description: "Pretends to transfer money.", InputSchema: transferSchema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in TransferArgs
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, fmt.Errorf("transfer arguments: %w", err)
			}
			var header string
			if req.Extra != nil {
				header = req.Extra.Header.Get(AccountHeader)
			}
			text := fmt.Sprintf("transfer %d from %s (header %s)", in.Amount, in.Account, header)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
		})
	return s
}

// StatelessHandler serves NewStatelessServer statelessly, as a 2026-07-28
// server: no Mcp-Session-Id, no GET stream, and the standard headers
// (Mcp-Method, Mcp-Name, Mcp-Param-*) checked against the body — a mismatch
// is answered with HTTP 400 and JSON-RPC error -32020.
func StatelessHandler() http.Handler {
	srv := NewStatelessServer()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true})
}
