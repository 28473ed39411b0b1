// Command benchchart draws one chart per curve from the CSV files that
// make bench writes (internal/benchcurve): for each file, an SVG of the
// same name with three panels against the size, on a logarithmic axis:
// items per second, requests per item and peak heap, one line per series.
// A flat line in the first two panels is a cost that grows with the work
// only.
//
//	go run . -in ../../../bench/out -out ../../../bench/out
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"image/color"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

func main() {
	in := flag.String("in", "bench/out", "folder of the curves' CSV files")
	out := flag.String("out", "", "folder for the charts (default: -in)")
	format := flag.String("format", "svg", "svg or png")
	flag.Parse()
	if *out == "" {
		*out = *in
	}
	files, err := filepath.Glob(filepath.Join(*in, "*.csv"))
	if err != nil {
		log.Fatal(err)
	}
	if len(files) == 0 {
		log.Fatalf("benchchart: no CSV files in %s (run make bench first)", *in)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".csv")
		if *format != "svg" && *format != "png" {
			log.Fatalf("benchchart: -format %q: want svg or png", *format)
		}
		path := filepath.Join(*out, name+"."+*format)
		if err := chart(f, path, *format); err != nil {
			log.Fatalf("benchchart: %s: %v", f, err)
		}
		fmt.Println("wrote", path)
	}
}

// row is one line of a curve's CSV file.
type row struct {
	series                               string
	size, perSecond, reqPerItem, heapMiB float64
}

func read(path string) (curve, item, sizeLabel string, rows []row, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", "", nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return "", "", "", nil, err
	}
	if len(recs) < 2 {
		return "", "", "", nil, fmt.Errorf("no data")
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, h := range []string{"curve", "item", "series", "size", "items_per_second", "requests_per_item", "peak_heap_bytes"} {
		if _, ok := col[h]; !ok {
			return "", "", "", nil, fmt.Errorf("no column %q", h)
		}
	}
	num := func(rec []string, h string) (float64, error) {
		v, err := strconv.ParseFloat(rec[col[h]], 64)
		if err != nil {
			return 0, fmt.Errorf("column %s: %w", h, err)
		}
		return v, nil
	}
	for _, rec := range recs[1:] {
		r := row{series: rec[col["series"]]}
		var heap float64
		for _, c := range []struct {
			h string
			v *float64
		}{{"size", &r.size}, {"items_per_second", &r.perSecond}, {"requests_per_item", &r.reqPerItem}, {"peak_heap_bytes", &heap}} {
			if *c.v, err = num(rec, c.h); err != nil {
				return "", "", "", nil, err
			}
		}
		r.heapMiB = heap / (1 << 20)
		rows = append(rows, r)
	}
	sizeLabel = "size"
	if i, ok := col["size_label"]; ok {
		sizeLabel = recs[1][i]
	}
	return recs[1][col["curve"]], recs[1][col["item"]], sizeLabel, rows, nil
}

func chart(in, out, format string) error {
	curve, item, sizeLabel, rows, err := read(in)
	if err != nil {
		return err
	}
	var series []string
	bySeries := map[string][]row{}
	for _, r := range rows {
		if _, ok := bySeries[r.series]; !ok {
			series = append(series, r.series)
		}
		bySeries[r.series] = append(bySeries[r.series], r)
	}
	panels := []struct {
		title string
		y     func(row) float64
	}{
		{item + "s per second", func(r row) float64 { return r.perSecond }},
		{"requests per " + item, func(r row) float64 { return r.reqPerItem }},
		{"peak heap (MiB)", func(r row) float64 { return r.heapMiB }},
	}
	plots := make([][]*plot.Plot, 1)
	for _, pn := range panels {
		p := plot.New()
		p.Title.Text = curve + ": " + pn.title
		p.X.Label.Text = sizeLabel
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
		for i, s := range series {
			rs := bySeries[s]
			sort.Slice(rs, func(a, b int) bool { return rs[a].size < rs[b].size })
			xy := make(plotter.XYs, len(rs))
			for j, r := range rs {
				xy[j].X, xy[j].Y = r.size, pn.y(r)
			}
			l, pts, err := plotter.NewLinePoints(xy)
			if err != nil {
				return err
			}
			c := plotutil.Color(i)
			l.Color, pts.Color = c, c
			pts.Shape = plotutil.Shape(i)
			p.Add(l, pts)
			p.Legend.Add(s, l, pts)
		}
		p.Legend.Top = true
		p.Legend.TextStyle.Color = color.Black
		plots[0] = append(plots[0], p)
	}
	const w, h = 15 * vg.Inch, 4 * vg.Inch
	var c vg.CanvasWriterTo = vgsvg.New(w, h)
	if format == "png" {
		c = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for j, p := range plots[0] {
		p.Draw(canvases[0][j])
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
