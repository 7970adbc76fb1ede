package mcpmsg

// invalid is an invalid-request reason.
func invalid(reason string) *errScan { return &errScan{CodeInvalidRequest, reason} }

// envelope records which envelope members a message has.
type envelope struct {
	hasRPC, hasID, hasMethod bool
}

// message parses the message object at i and returns it and its end.
func (s *scanner) message(i int) (Message, int, *errScan) {
	m := Message{paramsAt: -1, resultAt: -1}
	it, err := s.object(i)
	if err != nil {
		return m, 0, err
	}
	var env envelope
	for {
		mem, ok, err := it.nextName()
		if err != nil {
			return m, 0, err
		}
		if !ok {
			break
		}
		if s.indexing && string(mem.name) == "result" && mem.vStart < len(s.b) && s.b[mem.vStart] == '{' {
			mem.vEnd, err = s.listResult(mem.vStart)
		} else {
			mem.vEnd, err = s.value(mem.vStart)
		}
		if err != nil {
			return m, 0, err
		}
		it.i = mem.vEnd
		if err := s.member(&m, &env, mem, i); err != nil {
			return m, 0, err
		}
	}
	end := it.end
	m.Raw = s.b[i:end:end]
	if s.list != nil {
		s.list.shift(i)
		m.list, m.listLen, s.list = s.list, len(m.Raw), nil
	}
	if err := m.setKind(env); err != nil {
		return m, 0, err
	}
	switch m.Method {
	case MethodToolsCall, MethodPromptsGet, MethodResourcesRead:
		if m.Kind != KindRequest {
			return m, 0, invalid(m.Method + " must be a request with an id")
		}
		if err := s.hooked(&m, i); err != nil {
			return m, 0, err
		}
	}
	return m, end, nil
}

// member checks one member of the message object that starts at i and
// records it in m and env.
func (s *scanner) member(m *Message, env *envelope, mem member, i int) *errScan {
	v := s.b[mem.vStart:mem.vEnd]
	switch string(mem.name) {
	case "jsonrpc":
		if v[0] != '"' {
			return invalid(`"jsonrpc" must be "2.0"`)
		}
		u, _, err := s.unquote(mem.vStart, mem.vEnd)
		if err != nil || string(u) != "2.0" {
			return invalid(`"jsonrpc" must be "2.0"`)
		}
		env.hasRPC = true
	case "id":
		switch c := v[0]; {
		case c == '"' || c == '-' || (c >= '0' && c <= '9') || c == 'n':
			m.ID = v
			env.hasID = true
		default:
			return invalid(`"id" must be a string or a number`)
		}
	case "method":
		if v[0] != '"' {
			return invalid(`"method" must be a string`)
		}
		u, _, err := s.unquote(mem.vStart, mem.vEnd)
		if err != nil {
			return err
		}
		if hasControl(u) {
			return invalid(`"method" must not contain control characters`)
		}
		m.Method = internMethod(u)
		env.hasMethod = true
	case "params":
		if v[0] != '{' && v[0] != '[' {
			return invalid(`"params" must be an object or an array`)
		}
		m.Params = v
		m.paramsAt = mem.vStart - i
	case "result":
		m.Result = v
		m.resultAt = mem.vStart - i
	case "error":
		if v[0] != '{' {
			return invalid(`"error" must be an object`)
		}
		m.Error = v
	default:
		if k := caseVariant(mem.name, "jsonrpc", "id", "method", "params", "result", "error"); k != "" {
			return invalid("member " + quoteShort(mem.name) + ` differs from "` + k + `" only in case`)
		}
	}
	return nil
}

// setKind sets m.Kind from the members the message has, or says why they
// make no JSON-RPC message.
func (m *Message) setKind(env envelope) *errScan {
	if !env.hasRPC {
		return invalid(`"jsonrpc" must be "2.0"`)
	}
	null := env.hasID && m.ID[0] == 'n'
	switch {
	case env.hasMethod:
		if m.Result != nil || m.Error != nil {
			return invalid(`a message with a "method" cannot have a "result" or an "error"`)
		}
		if !env.hasID {
			m.Kind = KindNotification
			return nil
		}
		if null {
			return invalid(`a request "id" must be a string or a number, not null`)
		}
		if c := m.ID[0]; c != '"' && !plainSafeInteger(m.ID) {
			// An id the server would read as another value (id.go).
			return invalid(`a request "id" that is a number must be an integer written plainly, within ±(2^53-1)`)
		}
		m.Kind = KindRequest
	case m.Result != nil && m.Error != nil:
		return invalid(`a response cannot have both "result" and "error"`)
	case m.Result != nil:
		if !env.hasID || null {
			return invalid(`a response needs an "id" (a string or a number)`)
		}
		m.Kind = KindResponse
	case m.Error != nil:
		// JSON-RPC wants "id" (null when unknown), but the TypeScript SDK
		// omits it in its transport errors; an error carries nothing to
		// inspect, so both are accepted.
		m.Kind = KindError
	default:
		return invalid(`a message needs a "method", a "result" or an "error"`)
	}
	return nil
}

// hooked checks the params of a hooked request and fills m's views.
func (s *scanner) hooked(m *Message, at int) *errScan {
	if m.Params == nil {
		return &errScan{CodeInvalidParams, m.Method + `: "params" missing`}
	}
	// The params were fully checked during the message walk: only their top
	// level is walked again.
	skip := s.skip
	s.skip = true
	defer func() { s.skip = skip }()
	pos := at + m.paramsAt
	switch m.Method {
	case MethodToolsCall, MethodPromptsGet:
		name, args, err := s.namedArgs(pos, m.Method)
		if err != nil {
			return err
		}
		m.Name, m.Arguments = name, args
	case MethodResourcesRead:
		uri, err := s.resourceRead(pos)
		if err != nil {
			return err
		}
		m.URI = uri
	}
	return nil
}

// hasControl reports whether b holds a control character (a NUL would end
// the method name for a C string).
func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// internMethod returns b as a string, without allocating for the common MCP
// methods.
func internMethod(b []byte) string {
	switch string(b) {
	case MethodToolsCall:
		return MethodToolsCall
	case MethodPromptsGet:
		return MethodPromptsGet
	case MethodResourcesRead:
		return MethodResourcesRead
	case "initialize":
		return "initialize"
	case "ping":
		return "ping"
	case "tools/list":
		return "tools/list"
	case "prompts/list":
		return "prompts/list"
	case "resources/list":
		return "resources/list"
	case "resources/templates/list":
		return "resources/templates/list"
	case "resources/subscribe":
		return "resources/subscribe"
	case "resources/unsubscribe":
		return "resources/unsubscribe"
	case "completion/complete":
		return "completion/complete"
	case "logging/setLevel":
		return "logging/setLevel"
	case "sampling/createMessage":
		return "sampling/createMessage"
	case "elicitation/create":
		return "elicitation/create"
	case "roots/list":
		return "roots/list"
	case "notifications/initialized":
		return "notifications/initialized"
	case "notifications/progress":
		return "notifications/progress"
	case "notifications/cancelled":
		return "notifications/cancelled"
	case "notifications/message":
		return "notifications/message"
	case "notifications/resources/updated":
		return "notifications/resources/updated"
	case "notifications/resources/list_changed":
		return "notifications/resources/list_changed"
	case "notifications/tools/list_changed":
		return "notifications/tools/list_changed"
	case "notifications/prompts/list_changed":
		return "notifications/prompts/list_changed"
	case "notifications/roots/list_changed":
		return "notifications/roots/list_changed"
	}
	return string(b)
}
