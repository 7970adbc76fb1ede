package mcplist

import (
	"encoding/json"
	"testing"
)

func TestPrivateCacheScope(t *testing.T) {
	tests := []struct {
		name, in, want string
		changed        bool
	}{
		{"public", `{"ttlMs":60000,"cacheScope":"public","tools":[{"name":"a"}]}`, `{"ttlMs":60000,"cacheScope":"private","tools":[{"name":"a"}]}`, true},
		{"private already", `{"cacheScope":"private","tools":[]}`, `{"cacheScope":"private","tools":[]}`, false},
		{"no hint (older versions)", `{"tools":[{"name":"cacheScope","description":"public"}]}`, `{"tools":[{"name":"cacheScope","description":"public"}]}`, false},
		{"nested is not the result's", `{"tools":[{"name":"a","cacheScope":"public"}]}`, `{"tools":[{"name":"a","cacheScope":"public"}]}`, false},
		{"spaces kept", "{ \"cacheScope\" :  \"public\" ,\n \"tools\": [] }", "{ \"cacheScope\" :  \"private\" ,\n \"tools\": [] }", true},
		{"escaped name", `{"cache\u0053cope":"public","tools":[]}`, `{"cache\u0053cope":"private","tools":[]}`, true},
		{"case variant a lenient client reads", `{"CacheScope":"public","tools":[]}`, `{"CacheScope":"private","tools":[]}`, true},
		{"unknown value", `{"cacheScope":"shared","tools":[]}`, `{"cacheScope":"private","tools":[]}`, true},
		{"not a string", `{"cacheScope":{"a":1},"tools":[]}`, `{"cacheScope":"private","tools":[]}`, true},
		{"twice", `{"cacheScope":"private","cacheScope":"public"}`, `{"cacheScope":"private","cacheScope":"private"}`, true},
	}
	for _, tt := range tests {
		out, changed, err := PrivateCacheScope([]byte(tt.in))
		if err != nil || string(out) != tt.want || changed != tt.changed {
			t.Errorf("%s: PrivateCacheScope(%s) = %s, %v, %v; want %s, %v", tt.name, tt.in, out, changed, err, tt.want, tt.changed)
		}
		if !json.Valid(out) {
			t.Errorf("%s: %s is not JSON", tt.name, out)
		}
	}
	if _, _, err := PrivateCacheScope([]byte(`["cacheScope"]`)); err == nil {
		t.Error("an array result: no error")
	}
}
