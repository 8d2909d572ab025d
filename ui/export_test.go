package ui

import "slices"

// Patterns are the routes the dashboard's pages and actions are
// registered at.
func (h *Handler) Patterns() []string { return slices.Clone(h.patterns) }
