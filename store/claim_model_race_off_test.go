//go:build !race

package store_test

// raceEnabled scales the claim model's default budget down under -race.
const raceEnabled = false
