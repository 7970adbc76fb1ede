package mcplist

import "encoding/json"

// Some requests name a prompt or a resource without using it through its
// call method: completion/complete asks for argument completions of a
// prompt (ref/prompt, by name) or of a resource template (ref/resource, by
// URI), and resources/subscribe and resources/unsubscribe follow a
// resource's updates (by URI). What a caller may not see in a list, it may
// not complete or subscribe to either: Referenced says which item such a
// request names, as the item its list would hold.

// Referenced returns the call method and the item name a request of method
// with params names (prompts/get and a prompt name, resources/read and a
// resource URI), and false when method names no item this way or params
// do not say which. params must be valid JSON (as mcpmsg.Parse checked
// it).
func Referenced(method string, params []byte) (callMethod, name string, ok bool) {
	switch method {
	case "completion/complete":
		var p struct {
			Ref struct {
				Type string `json:"type"`
				Name string `json:"name"`
				URI  string `json:"uri"`
			} `json:"ref"`
		}
		if json.Unmarshal(params, &p) != nil {
			return "", "", false
		}
		switch p.Ref.Type {
		case "ref/prompt":
			return "prompts/get", p.Ref.Name, true
		case "ref/resource":
			return "resources/read", p.Ref.URI, true
		}
	case "resources/subscribe", "resources/unsubscribe":
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(params, &p) != nil {
			return "", "", false
		}
		return "resources/read", p.URI, true
	}
	return "", "", false
}
