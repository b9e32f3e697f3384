// Package svgcheck checks, in tests, that an SVG document drawn by
// internal/plot is well-formed and shows what it should: parsed with
// encoding/xml, it must have an <svg> root, the title and every series
// name among its <text> elements, and a stroked <path> in each series'
// colour.
package svgcheck

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image/color"
	"io"
	"slices"
	"strings"
	"testing"
)

// Path is a stroked <path> element: its stroke colour ("#RRGGBB") and the
// number of points its data moves or draws to.
type Path struct {
	Stroke string
	Points int
}

// Doc is what Parse found in an SVG document.
type Doc struct {
	Texts []string
	Paths []Path
}

// Parse decodes an SVG document with encoding/xml and collects the text
// of its <text> elements and its stroked paths. It fails on malformed XML
// or a root element other than <svg>.
func Parse(svg []byte) (Doc, error) {
	var doc Doc
	dec := xml.NewDecoder(bytes.NewReader(svg))
	depth, inText := 0, false
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Doc{}, fmt.Errorf("svgcheck: malformed SVG: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 0 && t.Name.Local != "svg" {
				return Doc{}, fmt.Errorf("svgcheck: root element is <%s>, want <svg>", t.Name.Local)
			}
			depth++
			switch t.Name.Local {
			case "text":
				inText = true
				text.Reset()
			case "path":
				if p, ok := strokedPath(t); ok {
					doc.Paths = append(doc.Paths, p)
				}
			}
		case xml.EndElement:
			depth--
			if t.Name.Local == "text" {
				inText = false
				doc.Texts = append(doc.Texts, text.String())
			}
		case xml.CharData:
			if inText {
				text.Write(t)
			}
		}
	}
	if depth != 0 || len(doc.Texts) == 0 && len(doc.Paths) == 0 {
		return Doc{}, errors.New("svgcheck: empty or truncated SVG")
	}
	return doc, nil
}

// strokedPath returns the stroke colour and point count of a <path>
// whose style strokes it.
func strokedPath(t xml.StartElement) (Path, bool) {
	var style, d string
	for _, a := range t.Attr {
		switch a.Name.Local {
		case "style":
			style = a.Value
		case "d":
			d = a.Value
		}
	}
	for _, kv := range strings.Split(style, ";") {
		k, v, _ := strings.Cut(kv, ":")
		if strings.TrimSpace(k) == "stroke" && strings.TrimSpace(v) != "none" {
			return Path{Stroke: strings.ToUpper(strings.TrimSpace(v)), Points: strings.Count(d, "M") + strings.Count(d, "L")}, true
		}
	}
	return Path{}, false
}

// HasText reports whether a <text> element reads s.
func (d Doc) HasText(s string) bool { return slices.Contains(d.Texts, s) }

// Curves counts the stroked paths of colour c with at least minPoints
// points (a data curve, not a legend swatch or a tick).
func (d Doc) Curves(c color.Color, minPoints int) int {
	want := Hex(c)
	n := 0
	for _, p := range d.Paths {
		if p.Stroke == want && p.Points >= minPoints {
			n++
		}
	}
	return n
}

// Hex returns c as "#RRGGBB", as the SVG writes it.
func Hex(c color.Color) string {
	r, g, b, _ := color.NRGBAModel.Convert(c).RGBA()
	return fmt.Sprintf("#%02X%02X%02X", r>>8, g>>8, b>>8)
}

// Check parses svg and fails t unless it is well-formed and has title and
// every name in names among its texts. It returns the parsed document for
// further checks.
func Check(t testing.TB, svg []byte, title string, names []string) Doc {
	t.Helper()
	doc, err := Parse(svg)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.HasText(title) {
		t.Errorf("SVG has no title %q among its texts %q", title, doc.Texts)
	}
	for _, n := range names {
		if !doc.HasText(n) {
			t.Errorf("SVG has no text %q among %q", n, doc.Texts)
		}
	}
	return doc
}
