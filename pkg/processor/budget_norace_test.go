//go:build !race

package processor

// raceEnabled reports a -race build (budget_race_test.go).
const raceEnabled = false
