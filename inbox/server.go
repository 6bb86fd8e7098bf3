package main

import (
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/store"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// server is the inbox: stateless, so any number of replicas can run behind
// a load balancer. It reads Temporal visibility and each claim's status
// query and history, and decides through the decide update with receipts
// signed by its service key.
type server struct {
	log       *slog.Logger
	temporal  client.Client
	dc        converter.DataConverter
	namespace string
	blobs     *blobs.Store
	// queue is the approval queue in the claims store: what the inbox
	// lists (store.QueueEntry), read only.
	queue   *store.Store
	cookies *cookies
	oidc    *oidcLogin // nil: the development sign-in
	key     authority.KeyFile
	// directory reads the approver directory: on every request, so a
	// change to the file (an approver added or removed) applies at once.
	directory func() (authority.Book, error)
	pages     map[string]*template.Template
	mux       *http.ServeMux
	// traces is the Jaeger query service a claim's trace is read from
	// (JAEGER_QUERY_URL; "" when none), through http.
	traces string
	http   *http.Client
}

// contentSecurityPolicy allows the inbox's own stylesheet and script and
// nothing else: no inline script or style, forms post only here, and the
// only frames are the inbox's own (a claim's PDF, itself sandboxed); no
// page of the inbox may be framed.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"frame-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (s *server) routes() {
	static, _ := fs.Sub(staticFiles, "static")
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServer(http.FS(static))))
	s.mux.HandleFunc("GET /login", s.login)
	s.mux.HandleFunc("GET /callback", s.callback)
	s.mux.HandleFunc("POST /dev-login", s.devLogin)
	s.mux.HandleFunc("POST /logout", s.logout)
	s.mux.HandleFunc("GET /{$}", s.signedIn(s.inbox))
	s.mux.HandleFunc("GET /claims/{id}", s.signedIn(s.claimPage))
	s.mux.HandleFunc("GET /claims/{id}/live", s.signedIn(s.live))
	s.mux.HandleFunc("POST /claims/{id}/decide", s.signedIn(s.decide))
	s.mux.HandleFunc("GET /claims/{id}/documents/{n}", s.signedIn(s.document))
	s.mux.HandleFunc("GET /claims/{id}/documents/{n}/view", s.signedIn(s.viewDocument))
	s.mux.HandleFunc("GET /traces/{trace}", s.signedIn(s.trace))
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if !strings.HasPrefix(r.URL.Path, "/static/") {
		h.Set("Cache-Control", "no-store")
	}
	if s.cookies.secure {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	s.mux.ServeHTTP(w, r)
}

// viewer is the signed-in approver, as the directory has them now.
type viewer struct {
	authority.Approver
	session session
	book    authority.Book
	format  format
}

// DevSession says the viewer signed in without an identity provider.
func (v viewer) DevSession() bool { return v.session.Dev }

// signedIn lets through only a signed-in approver who is still in the
// directory; a POST must also carry the session's form token.
func (s *server) signedIn(next func(http.ResponseWriter, *http.Request, viewer)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, ok := s.cookies.session(r)
		if !ok {
			if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, "/live") {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			s.fail(w, r, http.StatusUnauthorized, "sign in first", nil)
			return
		}
		if r.Method == http.MethodPost && !sameToken(r.PostFormValue("csrf"), sess.CSRF) {
			s.log.Warn("form refused: missing or wrong token", "approver", sess.Approver, "path", r.URL.Path)
			s.fail(w, r, http.StatusForbidden, "missing or wrong form token: reload the page and try again", nil)
			return
		}
		book, err := s.directory()
		if err != nil {
			s.fail(w, r, http.StatusInternalServerError, "the approver directory cannot be read", err)
			return
		}
		ap, ok := book.Approvers.Find(sess.Approver)
		if !ok {
			s.cookies.clear(w, "inbox_session")
			s.fail(w, r, http.StatusForbidden, "you are no longer an approver here", nil)
			return
		}
		next(w, r, viewer{Approver: ap, session: sess, book: book, format: newFormat(ap, r.Header.Get("Accept-Language"))})
	}
}

// page is what every template gets.
type page struct {
	Title   string
	Viewer  *viewer
	CSRF    string
	Problem string
	Notice  string
	Data    any
}

func (s *server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	t, ok := s.pages[name]
	if !ok {
		http.Error(w, "no such page", http.StatusInternalServerError)
		return
	}
	if p.Viewer != nil {
		p.CSRF = p.Viewer.session.CSRF
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := t.ExecuteTemplate(w, "layout", p); err != nil {
		s.log.Error("render", "page", name, "error", err)
	}
}

// fail shows an error page; err, if any, is logged, not shown.
func (s *server) fail(w http.ResponseWriter, r *http.Request, status int, msg string, err error) {
	if err != nil {
		s.log.Error(msg, "path", r.URL.Path, "error", err)
	}
	s.render(w, r, status, "error", page{Title: http.StatusText(status), Problem: msg})
}

func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, name := range []string{"inbox", "claim", "devlogin", "error", "trace"} {
		t, err := template.New(name).Funcs(template.FuncMap{"entryArgs": entryArgs}).ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

// entryArgs hands the inbox's "entry" template a claim and the formatter.
func entryArgs(e entry, f format) map[string]any { return map[string]any{"E": e, "F": f} }

// F formats for the viewer (their locale and time zone), or by default.
func (p page) F() format {
	if p.Viewer != nil {
		return p.Viewer.format
	}
	return newFormat(authority.Approver{}, "")
}
