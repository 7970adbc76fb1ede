package processor

import (
	"bytes"
	"unsafe"

	"github.com/mcp-extproc/mcp-extproc/internal/bytesmemo"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// A server answers tools/list with the same bytes to every client until
// its tools change, and a gateway repeats one aggregated list to every
// session. Reading such an answer (mcpmsg.ParseList: the validating scan
// that indexes the items) was more than half of what the processor spent
// on a 200-tool list the rules filter (issue 28), so the Server remembers
// the parses of the list answers it read, by their exact bytes and the
// keys they were indexed with: the same bytes again are not read again.
// ParseList is a pure function of the bytes and the keys, and the memo
// compares whole keys, so a hit is exactly what ParseList would return.
//
// A remembered *mcpmsg.Body is shared: every stream served it reads the
// same Body, its Messages, the bytes they alias and their ListIndex, at
// the same time. None of them is ever written after ParseList returns:
// what reads an answer (reader.answered and what it calls: results.match,
// the list filter of rules.go with pinning.go and listhooks.go, the post
// hooks, trail.result, mcpmsg.Join) only reads a Message, copies it by
// value to rewrite it (mcpmsg.ReplaceValidResult) and builds every
// changed body in a new buffer or one lent by bodyLender (EditValid,
// Filter, PrivateCacheScope and Join return their input itself only when
// nothing changed, and that is never lent back). A plugin's payload may
// be part of the bytes: the executor already hands one payload to
// concurrent plugins, which only read it.

// listMemoBytes bounds what a Server's memo of parsed list answers holds:
// the answers' bytes (twice: the body and the key), their messages and
// their indexes (parsedCost). The budgets' 200-tool list of 43 KiB is
// counted for 99 KiB, so the memo keeps the lists of dozens of servers,
// or versions of them.
const listMemoBytes = 8 << 20

// minListMemoBody is the smallest list answer that is remembered: a
// smaller one parses in a few microseconds, not worth its entry.
const minListMemoBody = 4 << 10

// listMemo remembers parsed list answers (see above). It is safe for
// concurrent use; a nil listMemo remembers nothing. What it served is
// counted by the Observer (ListRead).
type listMemo struct {
	memo *bytesmemo.Memo[parsedList]
}

// parsedList is a remembered list answer: ParseList's Body of it, with
// the keys it was indexed by. The Body is shared: never written.
type parsedList struct {
	keys mcpmsg.ListKeys
	body *mcpmsg.Body
}

// newListMemo returns a memo of at most maxBytes.
func newListMemo(maxBytes int) *listMemo {
	return &listMemo{memo: bytesmemo.New[parsedList](maxBytes)}
}

// parse is mcpmsg.ParseList(body, k), remembered when body is a list
// answer large enough: from the memo when the same bytes were parsed with
// the same keys before, else parsed and, when it parses, remembered (an
// error never is: a body that does not parse is read again each time).
// The Body returned may be shared with other streams: it must not be
// written. from says where the parse of a body large enough to be
// remembered came from: "memo" (these bytes were read before) or "scan"
// (read now); "" for a smaller one. owned reports that body is never written or reused by anyone
// (a buffered answer, decoded from its ext_proc message), so that a
// remembered Body may point into it; else (an SSE event's data, in the
// decoder's buffers) what is remembered is a parse of a copy.
func (m *listMemo) parse(body []byte, k mcpmsg.ListKeys, owned bool) (b *mcpmsg.Body, from string, err error) {
	if m == nil || len(body) < minListMemoBody {
		b, err = mcpmsg.ParseList(body, k)
		return b, "", err
	}
	if p, ok := m.memo.Get(body, func(p parsedList) bool { return p.keys == k }); ok {
		return p.body, "memo", nil
	}
	if !owned {
		body = bytes.Clone(body)
	}
	if b, err = mcpmsg.ParseList(body, k); err != nil {
		return nil, "scan", err
	}
	m.memo.Put(body, parsedList{keys: k, body: b}, parsedCost(b))
	return b, "scan", nil
}

// The sizes parsedCost counts a Body for.
const (
	bodySize     = int(unsafe.Sizeof(mcpmsg.Body{}))
	messageSize  = int(unsafe.Sizeof(mcpmsg.Message{}))
	listItemSize = int(unsafe.Sizeof(mcpmsg.ListItem{}))
	indexSize    = int(unsafe.Sizeof(mcpmsg.ListIndex{}))
)

// parsedCost estimates what the memo's entry of b holds: its bytes, as
// the body and as the key, the Body with its messages and their indexes,
// and the two maps' share.
func parsedCost(b *mcpmsg.Body) int {
	n := 2*len(b.Raw) + bodySize + 128
	if b.Batch {
		n += cap(b.Messages) * messageSize
	}
	for i := range b.Messages {
		if ix, ok := b.Messages[i].ListIndex(); ok {
			n += indexSize + cap(ix.Items)*listItemSize
		}
	}
	return n
}
