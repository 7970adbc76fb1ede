package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// A plugin (or its server) that echoes its input back in an error must not
// put the caller's credentials into the sidecar's logs or the client's
// error: the request's secrets are redacted from every PluginError, and
// the error chain stays intact.
func TestSecretsRedactedFromPluginErrors(t *testing.T) {
	const token = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.sig"
	echo := fmt.Sprintf("1 validation error for HttpHeaderPayload: input_value={'authorization': 'Bearer %s'}", token)
	cases := map[string]func(context.Context, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error){
		"error reply": func(context.Context, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			return &cpex.InvokeHookReply{Error: &cpex.PluginErrorModel{Message: echo}}, nil
		},
		"transport refusal": errH(fmt.Errorf("%w: HTTP 400: %q", ErrInvalidReply, echo)),
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFake(plug("auth", config.ModeSequential, 1))
			f.set("auth", h)
			e := newExec(t, f, Options{})
			rc := NewRequestContext(cpex.GlobalContext{})
			rc.Secrets = []string{"Bearer " + token, token}
			out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), rc.Clone(), Target{})
			if out.Err == nil {
				t.Fatal("no error")
			}
			if msg := out.Err.Error(); strings.Contains(msg, token) || !strings.Contains(msg, "[redacted]") {
				t.Errorf("error text %q shows the token", msg)
			}
			if out.Err.Model != nil && strings.Contains(out.Err.Model.Message, token) {
				t.Errorf("model message %q shows the token", out.Err.Model.Message)
			}
			if !errors.Is(out.Err, ErrPluginReported) && !errors.Is(out.Err, ErrInvalidReply) {
				t.Errorf("error chain lost: %v", out.Err)
			}
		})
	}
}
