//! `POST /plants` as plantstore answers it, on axum + tokio: bearer token,
//! `application/json` body of `{"id", "name", "tag"?}`, 409 for a taken id,
//! 507 past MAX_PLANTS, the Plant (without id) as the answer, Error bodies
//! `{"error", "message"}`. Plants live in a `Mutex<BTreeMap>`.
//!
//! Usage: plantstore-reference ADDR [MAX_PLANTS]   (token: PLANTSTORE_TOKEN)

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct NewPlant {
    id: i64,
    name: String,
    tag: Option<String>,
}

#[derive(Serialize)]
struct Plant {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    tag: Option<String>,
}

struct App {
    token: String,
    max_plants: usize,
    plants: Mutex<BTreeMap<i64, Plant>>,
}

fn error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({"error": status.as_u16(), "message": message});
    (status, axum::Json(body)).into_response()
}

async fn create(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let authorized = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| t == app.token);
    if !authorized {
        return error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token");
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "body must be application/json",
        );
    }
    let new: NewPlant = match serde_json::from_slice(&body) {
        Ok(new) => new,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let plant = Plant {
        name: new.name,
        tag: new.tag,
    };
    let answer = serde_json::to_vec(&plant).unwrap_or_default();
    {
        let mut plants = app.plants.lock().unwrap_or_else(|p| p.into_inner());
        if plants.contains_key(&new.id) {
            return error(StatusCode::CONFLICT, "a plant with this id exists");
        }
        if plants.len() >= app.max_plants {
            return error(StatusCode::INSUFFICIENT_STORAGE, "the store is full");
        }
        plants.insert(new.id, plant);
    }
    ([(header::CONTENT_TYPE, "application/json")], answer).into_response()
}

#[tokio::main]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8081".into());
    let max_plants = std::env::args()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let app = Arc::new(App {
        max_plants,
        token: std::env::var("PLANTSTORE_TOKEN").unwrap_or_else(|_| "bench-token".into()),
        plants: Mutex::new(BTreeMap::new()),
    });
    let router = Router::new().route("/plants", post(create)).with_state(app);
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    eprintln!(
        "reference listening on http://{}",
        listener.local_addr().expect("addr")
    );
    axum::serve(listener, router).await.expect("serve");
}
