package api

import (
	"slices"
)

// ProblemCodes lists every problem code the API answers with, sorted.
func ProblemCodes() []string {
	codes := make([]string, 0, len(titles))
	for c := range titles {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}
