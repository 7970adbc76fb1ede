//go:build race

package builtin_test

// raceEnabled reports a -race build: the race detector allocates on its
// own (and sync.Pool drops what it is given), so the allocation budget
// (chain_test.go) is skipped.
const raceEnabled = true
