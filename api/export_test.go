package api

import (
	"slices"
)

// ProblemCodes lists every problem code the API answers with, sorted.
func ProblemCodes() []string {
	codes := make([]string, 0, len(problemTypes))
	for c := range problemTypes {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}

// Patterns are the routes s registered on its mux, in order.
func (s *Server) Patterns() []string { return slices.Clone(s.patterns) }
