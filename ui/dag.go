package ui

import (
	"fmt"

	"github.com/gafferhq/gaffer/workflow"
)

// dag is a workflow run's steps laid out for SVG: each step in the column
// of its longest chain of dependencies, edges from a dependency's right
// side to the dependant's left.
type dag struct {
	Width, Height int
	Nodes         []dagNode
	Edges         []dagEdge
}

type dagNode struct {
	workflow.StepState
	X, Y, W, H int
	// TextX, TextY place the step's name; the state line sits below.
	TextX, TextY int
}

type dagEdge struct {
	Path string
	// Done: the dependency finished, so the edge is satisfied.
	Done bool
}

const (
	dagNodeW, dagNodeH = 168, 48
	dagColGap          = 64
	dagRowGap          = 20
	dagMargin          = 12
)

func layoutDAG(steps []workflow.StepState) dag {
	index := map[string]int{}
	for i, s := range steps {
		index[s.Name] = i
	}
	depth := make([]int, len(steps))
	seen := make([]int, len(steps)) // 0 new, 1 visiting, 2 done
	var visit func(i int) int
	visit = func(i int) int {
		if seen[i] == 2 || seen[i] == 1 { // 1: a cycle, which Submit refuses; do not loop
			return depth[i]
		}
		seen[i] = 1
		d := 0
		for _, dep := range steps[i].DependsOn {
			if j, ok := index[dep]; ok {
				d = max(d, visit(j)+1)
			}
		}
		depth[i], seen[i] = d, 2
		return d
	}
	rows := map[int]int{}
	g := dag{}
	for i := range steps {
		visit(i)
	}
	for i, s := range steps {
		col, row := depth[i], rows[depth[i]]
		rows[col]++
		n := dagNode{StepState: s, W: dagNodeW, H: dagNodeH,
			X: dagMargin + col*(dagNodeW+dagColGap), Y: dagMargin + row*(dagNodeH+dagRowGap)}
		n.TextX, n.TextY = n.X+10, n.Y+20
		g.Nodes = append(g.Nodes, n)
		g.Width = max(g.Width, n.X+n.W+dagMargin)
		g.Height = max(g.Height, n.Y+n.H+dagMargin)
	}
	for i, s := range steps {
		to := g.Nodes[i]
		for _, dep := range s.DependsOn {
			j, ok := index[dep]
			if !ok {
				continue
			}
			from := g.Nodes[j]
			x1, y1 := from.X+from.W, from.Y+from.H/2
			x2, y2 := to.X, to.Y+to.H/2
			mid := (x1 + x2) / 2
			g.Edges = append(g.Edges, dagEdge{
				Path: fmt.Sprintf("M%d %d C%d %d, %d %d, %d %d", x1, y1, mid, y1, mid, y2, x2-4, y2),
				Done: from.State == "completed" || (from.State == "failed" && from.AllowFailure),
			})
		}
	}
	return g
}
