package processor

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

func TestClientOf(t *testing.T) {
	str, num := structpb.NewStringValue, structpb.NewNumberValue
	for _, tc := range []struct {
		name       string
		addr, port *structpb.Value
		want       clientAddress
	}{
		{name: "both", addr: str("10.1.2.3:999"), port: num(999), want: clientAddress{"10.1.2.3", 999}},
		{name: "port attribute wins", addr: str("10.1.2.3:999"), port: num(1000), want: clientAddress{"10.1.2.3", 1000}},
		{name: "port from the address", addr: str("[fd00::2]:443"), want: clientAddress{"fd00::2", 443}},
		{name: "port as a string", addr: str("10.1.2.3"), port: str("8443"), want: clientAddress{"10.1.2.3", 8443}},
		{name: "no port", addr: str("10.1.2.3"), want: clientAddress{"10.1.2.3", 0}},
		{name: "a pipe", addr: str("/run/envoy.sock"), want: clientAddress{"/run/envoy.sock", 0}},
		{name: "fractional port", addr: str("h"), port: num(80.5), want: clientAddress{"h", 0}},
		{name: "port zero", addr: str("h:0"), want: clientAddress{"h", 0}},
		{name: "control character", addr: str("10.0.0.1\n:80"), port: num(80), want: clientAddress{"", 80}},
		{name: "over-long", addr: str(strings.Repeat("a", maxClientHost+1)), want: clientAddress{}},
		{name: "not a string", addr: num(1), want: clientAddress{}},
		{name: "absent"},
	} {
		if got := clientOf(tc.addr, tc.port); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
