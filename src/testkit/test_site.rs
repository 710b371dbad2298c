//! A small web site on `127.0.0.1:0` for the `browser` tool's tests, evals and bench: what a
//! real browser is needed for and `web_fetch` cannot do.
//!
//! - `/` — links to everything below.
//! - `/js` — a page whose content is written by JavaScript after load (empty to `web_fetch`).
//! - `/login` — a login form (`POST /login`, user [`USERNAME`], password [`PASSWORD`]); a good
//!   login sets a session cookie and redirects to `/account`, which greets the user only with it.
//! - `/order` — a form whose submit buys something (`POST /order` records the order).
//! - `/download` — a link to `/files/report.csv` served as an attachment.
//! - `/big` — about 1 MB of text in many paragraphs and links (the bench's page).
//! - `/choose` — a select list and a text field.
//! - `/leave?how=…&to=<url>` — a page that sends the browser to `to` by itself: `redirect` (a
//!   302), `script` (`location.href`), `iframe`, `image`, `meta` (a refresh) or `form` (a form
//!   posted by script); for the guard's tests, with `to` on a second site standing for a private
//!   address. `websocket`, `fetch` and `xhr` make the page itself connect to `to` (a `ws:` URL
//!   for the first) and write what happened into its heading (`Socket open`, `Socket failed`,
//!   `Fetched 200`, `Fetch failed`), for the egress proxy's tests; `webrtc` gathers WebRTC
//!   candidates with `to` as its STUN server (`stun:host:port`) and says `Gathered`.
//!
//! Every request's path and every form posted are recorded, so a test can prove what the browser
//! did (and that an order was not placed while its approval waited).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Form;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The user the login form accepts.
pub const USERNAME: &str = "ada.lovelace";
/// The password the login form accepts (long enough to be registered as a secret).
pub const PASSWORD: &str = "correct-horse-battery-staple-42";
/// The text `/js` shows once its script ran.
pub const JS_TEXT: &str = "Rendered by JavaScript: the tide is at 3.2 metres";
/// The content of `/files/report.csv`.
pub const REPORT_CSV: &str = "month,visitors\njanuary,120\nfebruary,135\n";
const SESSION_COOKIE: &str = "site_session=ok-7f3a";

#[derive(Default)]
struct SiteState {
    requests: Vec<String>,
    posts: Vec<(String, BTreeMap<String, String>)>,
}

type Shared = Arc<Mutex<SiteState>>;

fn lock(shared: &Shared) -> MutexGuard<'_, SiteState> {
    shared.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// The running site; stops when dropped.
pub struct TestSite {
    address: SocketAddr,
    state: Shared,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl TestSite {
    pub async fn start() -> std::io::Result<TestSite> {
        let state: Shared = Arc::default();
        let app = Router::new()
            .route("/", get(index))
            .route("/js", get(js_page))
            .route("/login", get(login_page).post(login_post))
            .route("/account", get(account))
            .route("/order", get(order_page).post(order_post))
            .route("/download", get(download_page))
            .route("/files/report.csv", get(report))
            .route("/big", get(big_page))
            .route("/choose", get(choose_page))
            .route("/leave", get(leave_page))
            .layer(axum::middleware::from_fn_with_state(state.clone(), record))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let (shutdown, signal) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let serving = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = signal.await;
            });
            let _ = serving.await;
        });
        Ok(TestSite {
            address,
            state,
            shutdown: Some(shutdown),
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// The paths requested so far, in order.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.state).requests.clone()
    }

    /// The forms posted so far: (path, fields).
    pub fn posts(&self) -> Vec<(String, BTreeMap<String, String>)> {
        lock(&self.state).posts.clone()
    }

    /// The orders placed (posts to `/order`).
    pub fn orders(&self) -> Vec<BTreeMap<String, String>> {
        self.posts()
            .into_iter()
            .filter(|(path, _)| path == "/order")
            .map(|(_, fields)| fields)
            .collect()
    }
}

impl Drop for TestSite {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn record(
    State(state): State<Shared>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    lock(&state).requests.push(request.uri().path().to_string());
    next.run(request).await
}

fn page(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!doctype html><html><head><meta charset=utf-8><title>{title}</title></head><body>{body}</body></html>"
    ))
}

async fn index() -> Html<String> {
    page(
        "Test site",
        "<h1>Test site</h1><ul><li><a href=/js>Tide page</a></li><li><a href=/login>Sign in</a></li>\
         <li><a href=/order>Shop</a></li><li><a href=/download>Reports</a></li><li><a href=/choose>Choose</a></li></ul>",
    )
}

async fn js_page() -> Html<String> {
    page(
        "Tides",
        &format!(
            "<h1>Tides</h1><div id=out>Loading…</div><script>setTimeout(() => {{ \
             document.getElementById('out').textContent = {text:?}; }}, 50);</script>",
            text = JS_TEXT
        ),
    )
}

async fn login_page() -> Html<String> {
    page(
        "Sign in",
        "<h1>Sign in</h1><form method=post action=/login>\
         <label for=user>Email or user name</label> <input id=user name=user type=text><br>\
         <label for=pass>Password</label> <input id=pass name=pass type=password><br>\
         <button type=submit>Sign in</button></form>",
    )
}

async fn login_post(
    State(state): State<Shared>,
    Form(fields): Form<BTreeMap<String, String>>,
) -> Response {
    let good = fields.get("user").map(String::as_str) == Some(USERNAME)
        && fields.get("pass").map(String::as_str) == Some(PASSWORD);
    let mut recorded = fields.clone();
    if recorded.contains_key("pass") {
        recorded.insert("pass".into(), "(given)".into());
    }
    lock(&state).posts.push(("/login".into(), recorded));
    if !good {
        return (
            StatusCode::UNAUTHORIZED,
            page(
                "Sign in failed",
                "<h1>Wrong user name or password</h1><a href=/login>Try again</a>",
            ),
        )
            .into_response();
    }
    let mut response = Redirect::to("/account").into_response();
    if let Ok(cookie) =
        header::HeaderValue::from_str(&format!("{SESSION_COOKIE}; Path=/; HttpOnly"))
    {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

async fn account(headers: HeaderMap) -> Response {
    let signed_in = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains(SESSION_COOKIE));
    if signed_in {
        page(
            "Your account",
            "<h1>Your account</h1><p>Signed in. Your balance is 42 euros.</p>",
        )
        .into_response()
    } else {
        Redirect::to("/login").into_response()
    }
}

async fn order_page() -> Html<String> {
    page(
        "Shop",
        "<h1>Shop</h1><form method=post action=/order><label for=qty>Boxes of tea</label> \
         <input id=qty name=qty type=number value=1><br><button type=submit>Buy now</button></form>",
    )
}

async fn order_post(
    State(state): State<Shared>,
    Form(fields): Form<BTreeMap<String, String>>,
) -> Html<String> {
    lock(&state).posts.push(("/order".into(), fields));
    page(
        "Order placed",
        "<h1>Thank you</h1><p>Your order is placed.</p>",
    )
}

async fn download_page() -> Html<String> {
    page(
        "Reports",
        "<h1>Reports</h1><p><a href=/files/report.csv download>Monthly visitors (CSV)</a></p>",
    )
}

async fn report() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/csv"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"report.csv\"",
            ),
        ],
        REPORT_CSV,
    )
}

async fn choose_page() -> Html<String> {
    page(
        "Choose",
        "<h1>Choose a colour</h1><label for=colour>Colour</label> <select id=colour name=colour>\
         <option value=r>Red</option><option value=g>Green</option><option value=b>Blue</option></select>\
         <p>Note <input name=note type=text placeholder='A note'></p><p id=shown></p>\
         <script>document.getElementById('colour').addEventListener('change', (e) => { \
         document.getElementById('shown').textContent = 'You chose ' + e.target.selectedOptions[0].text; });</script>",
    )
}

/// `/leave`: a page that goes to `to` by itself, the way `how` says.
async fn leave_page(
    axum::extract::Query(query): axum::extract::Query<BTreeMap<String, String>>,
) -> Response {
    let to = query.get("to").cloned().unwrap_or_default();
    let how = query.get("how").map(String::as_str).unwrap_or("redirect");
    // A JavaScript string literal (JSON is one) that cannot end the script element.
    let script_to = serde_json::to_string(&to)
        .unwrap_or_default()
        .replace('<', "\\u003c");
    let attribute_to = to
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let body = match how {
        "redirect" => return Redirect::to(&to).into_response(),
        "script" => format!("<h1>Moving on</h1><script>location.href = {script_to};</script>"),
        "iframe" => format!("<h1>A framed page</h1><iframe src=\"{attribute_to}\"></iframe>"),
        "image" => format!("<h1>A picture</h1><img alt=picture src=\"{attribute_to}\">"),
        "meta" => {
            return Html(format!(
                "<!doctype html><html><head><meta http-equiv=refresh content=\"0; url={attribute_to}\">\
                 <title>Refreshing</title></head><body><h1>Refreshing</h1></body></html>"
            ))
            .into_response();
        }
        "form" => format!(
            "<h1>Posting</h1><form id=f method=post action=\"{attribute_to}\"><input name=a value=1></form>\
             <script>document.getElementById('f').submit();</script>"
        ),
        "websocket" => format!(
            "<h1 id=status>Connecting</h1><script>const socket = new WebSocket({script_to});\
             const status = document.getElementById('status');\
             socket.onopen = () => {{ status.textContent = 'Socket open'; }};\
             socket.onerror = () => {{ status.textContent = 'Socket failed'; }};</script>"
        ),
        "fetch" => format!(
            "<h1 id=status>Fetching</h1><script>const status = document.getElementById('status');\
             fetch({script_to}, {{mode: 'no-cors'}})\
             .then(() => {{ status.textContent = 'Fetched 200'; }})\
             .catch(() => {{ status.textContent = 'Fetch failed'; }});</script>"
        ),
        "xhr" => format!(
            "<h1 id=status>Fetching</h1><script>const status = document.getElementById('status');\
             const request = new XMLHttpRequest(); request.open('GET', {script_to});\
             request.onload = () => {{ status.textContent = 'Fetched ' + request.status; }};\
             request.onerror = () => {{ status.textContent = 'Fetch failed'; }};\
             request.send();</script>"
        ),
        "webrtc" => format!(
            "<h1 id=status>Gathering</h1><script>const status = document.getElementById('status');\
             const peer = new RTCPeerConnection({{iceServers: [{{urls: {script_to}}}]}});\
             peer.createDataChannel('probe');\
             peer.onicegatheringstatechange = () => {{\
               if (peer.iceGatheringState === 'complete') status.textContent = 'Gathered'; }};\
             peer.createOffer().then((offer) => peer.setLocalDescription(offer))\
             .catch(() => {{ status.textContent = 'Gathered'; }});</script>"
        ),
        _ => return (StatusCode::BAD_REQUEST, "unknown how").into_response(),
    };
    page("Leaving", &body).into_response()
}

/// About 1 MB: 2,000 paragraphs of text with a link each.
async fn big_page() -> Html<String> {
    let mut body = String::from("<h1>A long page</h1>");
    for index in 0..2_000 {
        body.push_str(&format!(
            "<p>Paragraph {index}: the quick brown fox jumps over the lazy dog while the tide comes in and \
             goes out again, as it has every day for as long as anyone can remember, and the gulls \
             circle above the harbour looking for anything left behind by the fishing boats. \
             <a href=/big#p{index}>Section {index}</a></p>"
        ));
    }
    page("A long page", &body)
}
