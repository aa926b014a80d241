package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

type splitAnswer struct {
	EnvelopeID int64  `json:"envelope_id"`
	Commitment string `json:"commitment"`
	Salt       string `json:"salt"`
	Packets    []struct {
		PacketID    int64 `json:"packet_id"`
		AmountCents int64 `json:"amount_cents"`
	} `json:"packets"`
}

// splitCheck is the shell check docs/api.md gives under "Checking the split".
func splitCheck(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- split-check:begin -->\n```sh\n(.*?)```\n<!-- split-check:end -->").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/api.md has no split check between its markers")
	}
	return string(m[1])
}

// runSplitCheck runs the documented check on a split answer.
func runSplitCheck(t *testing.T, script string, split []byte, commitment string) string {
	t.Helper()
	for _, tool := range []string{"bash", "jq", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the documented check needs %s: %v", tool, err)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "split.json"), split, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "COMMITMENT="+commitment)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("split check: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestSplitIsShownOnceSettledAndChecksOut(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	e := c.createN(5000, 12, 3600)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(e.SplitCommitment) {
		t.Fatalf("split_commitment = %q, want 64 lowercase hex digits", e.SplitCommitment)
	}
	path := fmt.Sprintf("/v1/envelopes/%d/split", e.EnvelopeID)
	requireError(t, c.do("GET", path, ""), http.StatusConflict, "not_settled")
	for i := range 12 {
		c.grab(e.EnvelopeID, fmt.Sprintf("u%d", i))
	}
	flushAll(t, s) // sold out, not yet settled
	requireError(t, c.do("GET", path, ""), http.StatusConflict, "not_settled")
	settleAll(t, s)

	a := c.do("GET", path, "")
	if a.Status != http.StatusOK {
		t.Fatalf("split of a settled envelope: %s", a)
	}
	requireKeys(t, a, "envelope_id", "commitment", "salt", "packets")
	var sp splitAnswer
	requireJSON(t, a, &sp)
	if sp.Commitment != e.SplitCommitment || len(sp.Packets) != 12 || len(sp.Salt) != 64 {
		t.Fatalf("split %+v, create said %s", sp, e.SplitCommitment)
	}
	claims, _ := c.claimsOf(e.EnvelopeID, 100)
	var handedOut, split []int64
	for i := range claims {
		handedOut = append(handedOut, claims[i].PacketID, claims[i].AmountCents)
		split = append(split, sp.Packets[i].PacketID, sp.Packets[i].AmountCents)
	}
	if !slices.Equal(handedOut, split) {
		t.Errorf("claims list %v is not the split's order %v", handedOut, split)
	}

	script := splitCheck(t)
	if got := runSplitCheck(t, script, a.Body, e.SplitCommitment); got != "split verified" {
		t.Errorf("documented check on the true split: %q", got)
	}
	// Swapping two amounts (who got the big packet) breaks it.
	sp.Packets[0].AmountCents, sp.Packets[1].AmountCents = sp.Packets[1].AmountCents+1, sp.Packets[0].AmountCents-1
	tampered, _ := json.Marshal(sp)
	if got := runSplitCheck(t, script, tampered, e.SplitCommitment); got != "split MISMATCH" {
		t.Errorf("documented check on a changed split: %q", got)
	}
	requireError(t, c.do("GET", "/v1/envelopes/999999/split", ""), http.StatusNotFound, "not_found")
	requireError(t, c.do("GET", path+"?x=1", ""), http.StatusBadRequest, "invalid_argument")
}
