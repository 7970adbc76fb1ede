//go:build race

package processor

// raceEnabled reports a -race build: the race detector allocates on its
// own, so the allocation budgets (budget_test.go) are skipped.
const raceEnabled = true
