package proxy

import "net/http"

// servePage answers a validated request with its variant A page.
func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	st := state(r)
	start := s.now()
	page, status, err := s.up.fetch(r.Context(), st.req, st.id)
	st.upStatus, st.upDur = status, s.now().Sub(start)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeBody(w, r, http.StatusOK, page.Body)
}
