package mcpmsg

import "bytes"

// ListKeys name the members of a list result that [ParseList] indexes:
// the result's member that holds the items (e.g. "tools") and the item's
// member that names it (e.g. "name").
type ListKeys struct {
	Items, Name string
}

// ListIndex is where the items of a list result lie in its message's Raw,
// found by [ParseList] while it validated the result, so that a filter can
// drop items without reading the result again. Offsets are into
// Message.Raw.
type ListIndex struct {
	// Keys are the keys ParseList was given.
	Keys ListKeys
	// Open is the offset just after the items array's '[', Close the
	// offset of its ']'.
	Open, Close int
	// Items are the array's elements, in order.
	Items []ListItem
	// Scope is the span of the value of the result's member named
	// cacheScope in any case; Scope[0] is -1 when there is none.
	Scope [2]int
}

// ListItem is one item of a [ListIndex].
type ListItem struct {
	// Start and End delimit the item, an object.
	Start, End int
	// NameStart and NameEnd delimit the content (between the quotes) of
	// the item's name member, a string; NameStart is -1 when the item has
	// no name member or its value is not a string.
	NameStart, NameEnd int
	// NameEscaped reports that the name has escapes.
	NameEscaped bool
}

// ParseList is [Parse] for a body that may carry the result of a list
// method whose members k names: it accepts and refuses the same bodies,
// and it indexes (Message.ListIndex) each response whose result is a list
// that a filter can read without ambiguity: an object whose member
// k.Items, spelled exactly, is an array of objects, each with at most
// one member k.Name ignoring case, spelled exactly, and the result has
// at most one cacheScope member ignoring case. Any other result is not
// indexed, and a filter reads it again to say what is wrong with it.
func ParseList(body []byte, k ListKeys) (*Body, error) {
	if err := precheck(body); err != nil {
		return nil, err
	}
	b, err := scanBody(body, k, true)
	if err != nil {
		if e := checkJSON(body); e != nil {
			return nil, e
		}
		return nil, err
	}
	return b, nil
}

// ListIndex returns the index ParseList made of m's result, or false when
// it made none (Parse, or a result that is not a list it could index) or
// m.Raw is no longer the bytes it indexed.
func (m *Message) ListIndex() (*ListIndex, bool) {
	if m.list == nil || len(m.Raw) != m.listLen {
		return nil, false
	}
	if _, _, ok := m.ResultSpan(); !ok {
		return nil, false
	}
	return m.list, true
}

// listResult scans the result object at i as value does and, when it is
// a list it can index, leaves the index in s.list (offsets into s.b).
func (s *scanner) listResult(i int) (int, *errScan) {
	it, err := s.object(i)
	if err != nil {
		return 0, err
	}
	ix := s.spare
	if ix == nil {
		ix = new(ListIndex)
	}
	*ix = ListIndex{Keys: s.keys, Open: -1, Scope: [2]int{-1, -1}}
	ok := true
	for {
		mem, more, err := it.nextName()
		if err != nil {
			return 0, err
		}
		if !more {
			break
		}
		switch {
		case bytes.EqualFold(mem.name, []byte(s.keys.Items)):
			if ix.Open >= 0 || string(mem.name) != s.keys.Items || mem.vStart >= len(s.b) || s.b[mem.vStart] != '[' {
				ok = false
				mem.vEnd, err = s.value(mem.vStart)
				break
			}
			var good bool
			mem.vEnd, good, err = s.listItems(mem.vStart, ix)
			ok = ok && good
		case bytes.EqualFold(mem.name, []byte("cacheScope")):
			if ix.Scope[0] >= 0 {
				ok = false
			}
			mem.vEnd, err = s.value(mem.vStart)
			ix.Scope = [2]int{mem.vStart, mem.vEnd}
		default:
			mem.vEnd, err = s.value(mem.vStart)
		}
		if err != nil {
			return 0, err
		}
		it.i = mem.vEnd
	}
	if ok && ix.Open >= 0 {
		s.list = ix
		if ix == s.spare {
			s.spare = nil
		}
	}
	return it.end, nil
}

// listItems scans the items array at i into ix; ok is false when an item
// is not one ix can describe.
func (s *scanner) listItems(i int, ix *ListIndex) (end int, ok bool, err *errScan) {
	it, err := s.array(i)
	if err != nil {
		return 0, false, err
	}
	ix.Open = i + 1
	// A guess at the items' number (an item takes more than 128 bytes
	// but in the smallest lists), so that the index is one allocation.
	ix.Items = make([]ListItem, 0, (len(s.b)-i)/128+1)
	ok = true
	for {
		start, more, err := it.nextStart()
		if err != nil {
			return 0, false, err
		}
		if !more {
			ix.Close = it.end - 1
			return it.end, ok, nil
		}
		if start < len(s.b) && s.b[start] == '{' {
			item, good, err := s.listItem(start)
			if err != nil {
				return 0, false, err
			}
			ok = ok && good
			ix.Items = append(ix.Items, item)
			it.i = item.End
			continue
		}
		ok = false
		if it.i, err = s.value(start); err != nil {
			return 0, false, err
		}
	}
}

// listItem scans the item object at i and says where its name is; ok is
// false when its name member is not spelled exactly.
func (s *scanner) listItem(i int) (item ListItem, ok bool, err *errScan) {
	it, err := s.object(i)
	if err != nil {
		return item, false, err
	}
	item = ListItem{Start: i, NameStart: -1}
	ok = true
	seen := false
	for {
		mem, more, err := it.nextName()
		if err != nil {
			return item, false, err
		}
		if !more {
			item.End = it.end
			return item, ok, nil
		}
		if !bytes.EqualFold(mem.name, []byte(s.keys.Name)) {
			if it.i, err = s.value(mem.vStart); err != nil {
				return item, false, err
			}
			continue
		}
		if seen || string(mem.name) != s.keys.Name {
			ok = false
		}
		seen = true
		if mem.vStart >= len(s.b) || s.b[mem.vStart] != '"' {
			item.NameStart, item.NameEnd, item.NameEscaped = -1, 0, false
			if it.i, err = s.value(mem.vStart); err != nil {
				return item, false, err
			}
			continue
		}
		end, info, err := s.str(mem.vStart)
		if err != nil {
			return item, false, err
		}
		item.NameStart, item.NameEnd, item.NameEscaped = mem.vStart+1, end-1, info&strEscaped != 0
		it.i = end
	}
}

// shift makes ix's offsets relative to by.
func (ix *ListIndex) shift(by int) {
	ix.Open -= by
	ix.Close -= by
	if ix.Scope[0] >= 0 {
		ix.Scope[0] -= by
		ix.Scope[1] -= by
	}
	for k := range ix.Items {
		it := &ix.Items[k]
		it.Start -= by
		it.End -= by
		if it.NameStart >= 0 {
			it.NameStart -= by
			it.NameEnd -= by
		}
	}
}
