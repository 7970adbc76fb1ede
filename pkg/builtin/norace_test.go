//go:build !race

package builtin_test

// raceEnabled reports a -race build (race_test.go).
const raceEnabled = false
