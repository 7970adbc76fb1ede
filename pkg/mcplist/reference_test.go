package mcplist

import "testing"

func TestReferenced(t *testing.T) {
	tests := []struct {
		method, params   string
		callMethod, name string
		ok               bool
	}{
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"code_review"},"argument":{"name":"language","value":"py"}}`, "prompts/get", "code_review", true},
		{"completion/complete", `{"ref":{"type":"ref/resource","uri":"file:///{path}"},"argument":{"name":"path","value":"/e"}}`, "resources/read", "file:///{path}", true},
		{"completion/complete", `{"ref":{"type":"ref/tool","name":"x"}}`, "", "", false},
		{"completion/complete", `{"argument":{"name":"a","value":"b"}}`, "", "", false},
		{"completion/complete", `[]`, "", "", false},
		{"resources/subscribe", `{"uri":"file:///secret.txt"}`, "resources/read", "file:///secret.txt", true},
		{"resources/unsubscribe", `{"uri":"file:///secret.txt"}`, "resources/read", "file:///secret.txt", true},
		{"resources/subscribe", `{"uri":7}`, "", "", false},
		{"resources/read", `{"uri":"file:///a"}`, "", "", false},
		{"tools/call", `{"name":"echo"}`, "", "", false},
	}
	for _, tt := range tests {
		cm, name, ok := Referenced(tt.method, []byte(tt.params))
		if cm != tt.callMethod || name != tt.name || ok != tt.ok {
			t.Errorf("Referenced(%s, %s) = %q, %q, %v; want %q, %q, %v", tt.method, tt.params, cm, name, ok, tt.callMethod, tt.name, tt.ok)
		}
	}
}
