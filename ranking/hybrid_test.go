package ranking_test

import (
	"math"
	"testing"

	"github.com/memoryd/memoryd/ranking"
)

// TestHybridConstants: the vector score and the fusion with other
// constants than the defaults, as tools/memeval -cv measures them.
func TestHybridConstants(t *testing.T) {
	def := ranking.DefaultHybrid()
	nm := ranking.NoiseMax(1000)
	cos := 0.5 + (nm+2)*0.05 // 2 sd over chance: 0.5 with the defaults
	for _, c := range []struct {
		name string
		h    ranking.Hybrid
		want float64
	}{
		{"defaults", def, 0.5},
		{"VectorHalf 1", ranking.Hybrid{VectorHalf: 1, NoiseScale: 1, VectorWeight: 1}, 2.0 / 3},
		{"no chance offset", ranking.Hybrid{VectorHalf: 2, NoiseScale: 0, VectorWeight: 1}, (nm + 2) / (nm + 4)},
		{"half the offset", ranking.Hybrid{VectorHalf: 2, NoiseScale: 0.5, VectorWeight: 1}, (nm/2 + 2) / (nm/2 + 4)},
	} {
		if got := c.h.VectorScore(cos, 0.5, 0.05, 1000, 1000); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: VectorScore = %.6f, want %.6f", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		name      string
		h         ranking.Hybrid
		l, v, r   float64
		want      float64
		wantExact bool
	}{
		{"lexical only", def, 0.4, 0, 1, 0.4, true},
		{"vector only", def, 0, 0.5, 0.9, 0.45, false},
		{"both", def, 0.4, 0.5, 1, 0.7, false},
		{"weight 0.5", ranking.Hybrid{VectorHalf: 2, NoiseScale: 1, VectorWeight: 0.5}, 0.4, 0.5, 1, 1 - 0.6*0.75, false},
		{"weight 1.5, at most 1", ranking.Hybrid{VectorHalf: 2, NoiseScale: 1, VectorWeight: 1.5}, 0.4, 0.9, 1, 1, false},
	} {
		got := c.h.Fuse(c.l, c.v, c.r)
		if math.Abs(got-c.want) > 1e-12 || (c.wantExact && got != c.l) {
			t.Errorf("%s: Fuse = %.6f, want %.6f", c.name, got, c.want)
		}
	}
	p := ranking.DefaultParams()
	if got := p.Recency(-5); got != 1 {
		t.Errorf("Recency of an item newer than the query = %v, want 1", got)
	}
	if got, want := p.Recency(p.RecencyDays*86400), 1-p.RecencyWeight/2; math.Abs(got-want) > 1e-12 {
		t.Errorf("Recency at RecencyDays = %v, want %v", got, want)
	}
}
