package sse

// AppendEvent appends a new event to dst: an "event" line when typ is not
// empty, data as "data: " lines (split at line breaks, which a data line
// cannot carry), and the blank line that ends the event. Lines end with LF.
// typ must not contain a line break.
func AppendEvent(dst []byte, typ string, data []byte) []byte {
	if typ != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, typ...)
		dst = append(dst, '\n')
	}
	dst = appendData(dst, data, true, lf, lf)
	return append(dst, '\n')
}

var lf = []byte("\n")
