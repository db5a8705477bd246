package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// maxPatchBody bounds the PATCH body the proxy reads to summarize
// (RemovedOwners); the GC's patches are a few hundred bytes.
const maxPatchBody = 64 << 10

// readPatch reads req's body, a PATCH's, puts it back for passing on, and
// returns the UIDs of the owner references it deletes (RemovedOwners).
func readPatch(req *http.Request) []string {
	if req.Body == nil || req.ContentLength > maxPatchBody {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, maxPatchBody+1))
	rest := req.Body
	req.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), rest), rest}
	if err != nil || len(b) > maxPatchBody {
		return nil
	}
	return RemovedOwners(b)
}

// RemovedOwners are the UIDs of the owner references a strategic merge
// patch deletes: its metadata.ownerReferences entries with the
// "$patch": "delete" directive, as the garbage collector's
// deleteOwnerRefStrategicMergePatch writes them (an orphan worker's PATCH
// of a dependent removing the reference to the owner it orphans, or an
// attemptToDelete worker's removing dangling references):
//
//	{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"OWNER"}],"uid":"DEPENDENT"}}
//
// Nil for any other body (a JSON merge patch, which lists the references
// that stay, or no JSON at all).
func RemovedOwners(body []byte) []string {
	var p struct {
		Metadata struct {
			OwnerReferences []struct {
				Patch string `json:"$patch"`
				UID   string `json:"uid"`
			} `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &p) != nil {
		return nil
	}
	var out []string
	for _, r := range p.Metadata.OwnerReferences {
		if r.Patch == "delete" && r.UID != "" {
			out = append(out, r.UID)
		}
	}
	return out
}
