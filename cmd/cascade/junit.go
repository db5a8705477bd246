package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"time"
)

// JUnit XML as CI systems read it (the Jenkins/Ant schema that GitHub,
// GitLab and Jenkins accept): one testsuite per target, one testcase per
// trace (or randomized run), a failure carrying the diff, an error
// carrying why a replay could not complete, skipped carrying the reason.

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr"`
	Hostname  string      `xml:"hostname,attr,omitempty"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr,omitempty"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure"`
	Error     *junitMessage `xml:"error"`
	Skipped   *junitMessage `xml:"skipped"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// writeJUnit writes one testsuite for a conform run on a target.
func writeJUnit(w io.Writer, rep *conformReport) error {
	suite := junitSuite{
		Name:      "cascade conform " + rep.Target,
		Time:      fmt.Sprintf("%.3f", rep.Seconds),
		Timestamp: rep.Started.UTC().Format(time.RFC3339),
		Hostname:  rep.Where,
	}
	for _, c := range rep.Cases {
		jc := junitCase{Name: c.Name, Classname: "cascade." + rep.Target + "." + c.Phase, File: c.Path, Time: fmt.Sprintf("%.3f", c.Seconds)}
		switch c.Result {
		case resultFail:
			suite.Failures++
			jc.Failure = &junitMessage{Message: firstLine(c.Message), Type: "divergence", Text: c.Message}
		case resultError:
			suite.Errors++
			jc.Error = &junitMessage{Message: firstLine(c.Message), Type: "error", Text: c.Message}
		case resultSkip:
			suite.Skipped++
			jc.Skipped = &junitMessage{Message: c.Message}
		}
		if c.Result == resultFail || c.Result == resultError {
			jc.SystemOut = c.outputText()
		}
		suite.Cases = append(suite.Cases, jc)
	}
	suite.Tests = len(suite.Cases)
	doc := junitSuites{
		Name: "cascade conform", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors,
		Skipped: suite.Skipped, Time: suite.Time, Suites: []junitSuite{suite},
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func firstLine(s string) string {
	for i := range s {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
