package mcpmsg

// member is one object member: its unescaped name and its value's span.
type member struct {
	name         []byte
	nStart       int // index of the name's opening quote
	vStart, vEnd int
}

// objIter walks the members of one object.
type objIter struct {
	s     *scanner
	i     int // next position to read
	end   int // one past the closing brace, once done
	base  int // index in s.names of this object's first name
	fold  map[string]struct{}
	first bool
	done  bool
}

// object starts walking the object at i.
func (s *scanner) object(i int) (objIter, *errScan) {
	if err := s.enter(); err != nil {
		return objIter{}, err
	}
	return objIter{s: s, i: i + 1, base: len(s.names), first: true}, nil
}

// next returns the next member, or ok false after the closing brace (then
// it.end is set and the object's names are popped).
func (it *objIter) next() (m member, ok bool, err *errScan) {
	if m, ok, err = it.nextName(); !ok || err != nil {
		return m, ok, err
	}
	if m.vEnd, err = it.s.value(m.vStart); err != nil {
		return member{}, false, err
	}
	it.i = m.vEnd
	return m, true, nil
}

// nextName is next without the value: it returns the member with vStart
// set, and the caller scans the value and sets it.i to its end.
func (it *objIter) nextName() (m member, ok bool, err *errScan) {
	s := it.s
	if it.done {
		return member{}, false, nil
	}
	i := s.ws(it.i)
	if i >= len(s.b) {
		return member{}, false, errTruncated()
	}
	switch {
	case s.b[i] == '}' && it.first:
		return it.close(i)
	case !it.first:
		switch s.b[i] {
		case '}':
			return it.close(i)
		case ',':
			i = s.ws(i + 1)
		default:
			return member{}, false, &errScan{CodeParseError, "',' or '}' expected"}
		}
	}
	it.first = false
	i0 := i
	nEnd, info, err := s.str(i)
	if err != nil {
		return member{}, false, err
	}
	name, ref, err := s.unquoteAs(i, nEnd, info&strEscaped != 0)
	if err != nil {
		return member{}, false, err
	}
	ref.key = foldKey(name, info)
	if err := it.addName(name, ref); err != nil {
		return member{}, false, err
	}
	i = s.ws(nEnd)
	if i >= len(s.b) || s.b[i] != ':' {
		return member{}, false, &errScan{CodeParseError, "':' expected"}
	}
	return member{name: name, nStart: i0, vStart: s.ws(i + 1)}, true, nil
}

func (it *objIter) close(i int) (member, bool, *errScan) {
	it.done = true
	it.end = i + 1
	it.s.names = it.s.names[:it.base]
	it.s.depth--
	return member{}, false, nil
}

// addName records name, refusing one that equals an earlier name of the same
// object under Unicode case folding. Servers written in Go with
// encoding/json v1 (and .NET with case-insensitive options) match member
// names case-insensitively, so {"Arguments":…,"arguments":…} would be read
// differently by this guard and by such a server.
func (it *objIter) addName(name []byte, ref nameRef) *errScan {
	s := it.s
	if it.fold != nil {
		k := string(appendFold(nil, name))
		if _, dup := it.fold[k]; dup {
			return dupError(name)
		}
		it.fold[k] = struct{}{}
		return nil
	}
	prev := s.names[it.base:]
	for _, p := range prev {
		if p.key != ref.key && (p.key|ref.key)&fullCompare == 0 {
			continue // ASCII names that differ in upper case
		}
		if foldEqual(s.nameBytes(p), name) {
			return dupError(name)
		}
	}
	if len(prev) < linearNames {
		s.names = append(s.names, ref)
		return nil
	}
	it.fold = make(map[string]struct{}, 2*linearNames)
	for _, p := range prev {
		it.fold[string(appendFold(nil, s.nameBytes(p)))] = struct{}{}
	}
	it.fold[string(appendFold(nil, name))] = struct{}{}
	return nil
}

func dupError(name []byte) *errScan {
	return &errScan{CodeInvalidRequest, "duplicate member name " + quoteShort(name) + " (names must differ even ignoring case)"}
}

// arrIter walks the elements of one array.
type arrIter struct {
	s     *scanner
	i     int
	end   int
	first bool
	done  bool
}

func (s *scanner) array(i int) (arrIter, *errScan) {
	if err := s.enter(); err != nil {
		return arrIter{}, err
	}
	return arrIter{s: s, i: i + 1, first: true}, nil
}

// next returns the span of the next element, or ok false after the closing
// bracket (then it.end is set).
func (it *arrIter) next() (start, end int, ok bool, err *errScan) {
	if start, ok, err = it.nextStart(); !ok || err != nil {
		return 0, 0, ok, err
	}
	if end, err = it.s.value(start); err != nil {
		return 0, 0, false, err
	}
	it.i = end
	return start, end, true, nil
}

// nextStart is next without the element: it returns where the element
// starts (maybe at the end of the input), and the caller scans it and
// sets it.i to its end.
func (it *arrIter) nextStart() (start int, ok bool, err *errScan) {
	s := it.s
	if it.done {
		return 0, false, nil
	}
	i := s.ws(it.i)
	if i >= len(s.b) {
		return 0, false, errTruncated()
	}
	if s.b[i] == ']' {
		it.done = true
		it.end = i + 1
		s.depth--
		return 0, false, nil
	}
	if !it.first {
		if s.b[i] != ',' {
			return 0, false, &errScan{CodeParseError, "',' or ']' expected"}
		}
		i = s.ws(i + 1)
	}
	it.first = false
	return i, true, nil
}
