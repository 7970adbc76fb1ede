package mcpmsg

// ToolCall returns params.name and the raw params.arguments (nil if absent)
// of a tools/call request. params is validated as strictly as by Parse; for
// a message from Parse, Message.Name and Message.Arguments hold the same
// values without a second pass.
func ToolCall(params []byte) (name string, args []byte, err error) {
	return namedArgs(params, MethodToolsCall)
}

// PromptGet returns params.name and the raw params.arguments (nil if absent)
// of a prompts/get request; the arguments' values must be strings.
func PromptGet(params []byte) (name string, args []byte, err error) {
	return namedArgs(params, MethodPromptsGet)
}

// ResourceRead returns params.uri of a resources/read request.
func ResourceRead(params []byte) (uri string, err error) {
	s, pos, e := checkedParams(params, MethodResourcesRead)
	if e != nil {
		return "", e
	}
	uri, se := s.resourceRead(pos)
	if se != nil {
		return "", se.toError("")
	}
	return uri, nil
}

func namedArgs(params []byte, method string) (string, []byte, error) {
	s, pos, e := checkedParams(params, method)
	if e != nil {
		return "", nil, e
	}
	name, args, se := s.namedArgs(pos, method)
	if se != nil {
		return "", nil, se.toError("")
	}
	return name, args, nil
}

// checkedParams validates params fully and returns a scanner, set to skip
// nested values, and the position of the value.
func checkedParams(params []byte, method string) (*scanner, int, *Error) {
	s := &scanner{b: params}
	pos := s.ws(0)
	if pos == len(params) {
		return nil, 0, paramsErr(method, `"params" missing`).toError("")
	}
	if err := checkJSON(params); err != nil {
		return nil, 0, err
	}
	if _, err := s.value(pos); err != nil {
		return nil, 0, err.toError("")
	}
	s.skip = true
	return s, pos, nil
}

func paramsErr(method, reason string) *errScan {
	return &errScan{CodeInvalidParams, method + ": " + reason}
}

// namedArgs reads {"name": string, "arguments": object?} at pos.
func (s *scanner) namedArgs(pos int, method string) (string, []byte, *errScan) {
	if pos >= len(s.b) || s.b[pos] != '{' {
		return "", nil, paramsErr(method, `"params" must be an object`)
	}
	it, err := s.object(pos)
	if err != nil {
		return "", nil, err
	}
	var (
		name    string
		hasName bool
		args    []byte
	)
	for {
		mem, ok, err := it.next()
		if err != nil {
			return "", nil, err
		}
		if !ok {
			break
		}
		v := s.b[mem.vStart:mem.vEnd]
		switch string(mem.name) {
		case "name":
			if v[0] != '"' {
				return "", nil, paramsErr(method, `"params.name" must be a string`)
			}
			u, _, err := s.unquote(mem.vStart, mem.vEnd)
			if err != nil {
				return "", nil, err
			}
			name, hasName = string(u), true
		case "arguments":
			if v[0] != '{' {
				return "", nil, paramsErr(method, `"params.arguments" must be an object`)
			}
			if method == MethodPromptsGet {
				if err := s.stringValues(mem.vStart, method); err != nil {
					return "", nil, err
				}
			}
			args = v
		default:
			if k := caseVariant(mem.name, "name", "arguments"); k != "" {
				return "", nil, paramsErr(method, "member "+quoteShort(mem.name)+` differs from "`+k+`" only in case`)
			}
		}
	}
	if !hasName {
		return "", nil, paramsErr(method, `"params.name" must be a string`)
	}
	return name, args, nil
}

// stringValues checks that every member of the object at pos is a string.
func (s *scanner) stringValues(pos int, method string) *errScan {
	it, err := s.object(pos)
	if err != nil {
		return err
	}
	for {
		mem, ok, err := it.next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if s.b[mem.vStart] != '"' {
			return paramsErr(method, `argument `+quoteShort(mem.name)+` must be a string`)
		}
	}
}

// resourceRead reads {"uri": string} at pos.
func (s *scanner) resourceRead(pos int) (string, *errScan) {
	const method = MethodResourcesRead
	if pos >= len(s.b) || s.b[pos] != '{' {
		return "", paramsErr(method, `"params" must be an object`)
	}
	it, err := s.object(pos)
	if err != nil {
		return "", err
	}
	var (
		uri    string
		hasURI bool
	)
	for {
		mem, ok, err := it.next()
		if err != nil {
			return "", err
		}
		if !ok {
			break
		}
		if string(mem.name) != "uri" {
			if k := caseVariant(mem.name, "uri"); k != "" {
				return "", paramsErr(method, "member "+quoteShort(mem.name)+` differs from "`+k+`" only in case`)
			}
			continue
		}
		if s.b[mem.vStart] != '"' {
			return "", paramsErr(method, `"params.uri" must be a string`)
		}
		u, _, err := s.unquote(mem.vStart, mem.vEnd)
		if err != nil {
			return "", err
		}
		uri, hasURI = string(u), true
	}
	if !hasURI {
		return "", paramsErr(method, `"params.uri" must be a string`)
	}
	return uri, nil
}
