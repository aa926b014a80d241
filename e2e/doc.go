// Package e2e holds end-to-end tests: they build the real binaries, run them
// against a test database and Redis prefix, and talk to them over HTTP.
package e2e
