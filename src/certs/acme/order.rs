//! One certificate order, as one async function that the `acme` thread
//! runs with `executor::block_on`: the account (kept in the state
//! directory, made once), the order for the name, the challenge answered,
//! the order polled until ready, the request (a new P-256 key, the CSR made
//! by the protocol library with rcgen), the certificate fetched.
//!
//! Waits are the thread's own sleeps between `refresh`es, a bounded number
//! of them (the library's `poll_ready` would sleep on tokio's timer). A
//! CA's `badNonce` refusal (a request not processed) is sent again, a
//! bounded number of times, on top of the library's own three tries.

use std::time::Duration;

use instant_acme::{
    Account, AuthorizationStatus, ChallengeType, Error, Identifier, NewAccount, NewOrder, Order,
    OrderStatus,
};

use super::http::Client;
use super::{Challenge, Settings};

/// How often a request refused for its nonce is sent again.
const NONCE_TRIES: u32 = 8;
/// How many times an order is looked at while the CA validates or issues.
const POLLS: u32 = 40;
/// The first pause between two looks; it grows to `MAX_PAUSE`.
const FIRST_PAUSE: Duration = Duration::from_millis(250);
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// A certificate issued: its chain and its key, PEM.
pub struct Issued {
    pub chain: String,
    pub key: String,
}

/// Sends a request again while the CA refuses its nonce.
macro_rules! again {
    ($call:expr) => {{
        let mut tries = 0;
        loop {
            match $call.await {
                Err(e) if bad_nonce(&e) && tries < NONCE_TRIES => tries += 1,
                done => break done,
            }
        }
    }};
}

fn bad_nonce(e: &Error) -> bool {
    problem(e) == Some("urn:ietf:params:acme:error:badNonce")
}

fn problem(e: &Error) -> Option<&str> {
    match e {
        Error::Api(problem) => problem.r#type.as_deref(),
        _ => None,
    }
}

/// The error in words: a CA's problem with its type and detail.
pub fn words(e: &Error) -> String {
    match e {
        Error::Api(problem) => {
            let kind = problem.r#type.as_deref().unwrap_or("a problem");
            let kind = kind
                .strip_prefix("urn:ietf:params:acme:error:")
                .unwrap_or(kind);
            match &problem.detail {
                Some(detail) => format!("the CA answered {kind}: {detail}"),
                None => format!("the CA answered {kind}"),
            }
        }
        e => e.to_string(),
    }
}

/// Orders a certificate for `settings.domain`.
pub async fn obtain(settings: &Settings, http: &Client) -> Result<Issued, String> {
    let (account, stored) = account(settings, http).await?;
    let identifiers = [Identifier::Dns(settings.domain.clone())];
    let order = match again!(account.new_order(&NewOrder::new(&identifiers))) {
        Err(e)
            if stored && problem(&e) == Some("urn:ietf:params:acme:error:accountDoesNotExist") =>
        {
            log::warn!(target: "plantstore", "ACME: the CA no longer knows the kept account; making a new one");
            let account = create(settings, http).await?;
            again!(account.new_order(&NewOrder::new(&identifiers)))
        }
        order => order,
    };
    let mut order = order.map_err(|e| format!("cannot open an order: {}", words(&e)))?;
    let answered = answer(settings, &mut order).await;
    let issued = match answered {
        Ok(()) => finish(&mut order).await,
        Err(e) => Err(e),
    };
    settings.challenges.clear();
    issued
}

/// The account kept for the directory, or a new one, kept; with whether
/// it was kept.
async fn account(settings: &Settings, http: &Client) -> Result<(Account, bool), String> {
    let Some(credentials) = settings.dir.account(&settings.directory)? else {
        return Ok((create(settings, http).await?, false));
    };
    let account = Account::builder_with_http(Box::new(Client::clone(http)))
        .from_credentials(credentials)
        .await
        .map_err(|e| format!("cannot read the ACME directory: {}", words(&e)))?;
    Ok((account, true))
}

/// A new account on the directory, kept in the state directory.
async fn create(settings: &Settings, http: &Client) -> Result<Account, String> {
    let contact = settings.email.as_ref().map(|e| format!("mailto:{e}"));
    let contact: Vec<&str> = contact.iter().map(String::as_str).collect();
    let new = NewAccount {
        contact: &contact,
        terms_of_service_agreed: true,
        only_return_existing: false,
    };
    let (account, credentials) = again!(
        Account::builder_with_http(Box::new(Client::clone(http))).create(
            &new,
            settings.directory.clone(),
            None
        )
    )
    .map_err(|e| format!("cannot make an ACME account: {}", words(&e)))?;
    settings
        .dir
        .save_account(&settings.directory, &credentials)?;
    log::info!(target: "plantstore", "ACME: made an account on {}", settings.directory);
    Ok(account)
}

/// Answers every pending authorization's challenge and tells the CA.
async fn answer(settings: &Settings, order: &mut Order) -> Result<(), String> {
    let kind = match settings.challenge {
        Challenge::Http01 => ChallengeType::Http01,
        Challenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
    };
    for _ in 0..NONCE_TRIES {
        match answer_once(settings, order, &kind).await {
            Err(e) if bad_nonce(&e) => continue,
            Err(e) => return Err(format!("cannot answer the challenge: {}", words(&e))),
            Ok(None) => return Ok(()),
            Ok(Some(why)) => return Err(why),
        }
    }
    Err("the CA kept refusing the requests' nonces".into())
}

/// One pass over the authorizations; `Some` for why one cannot be done.
async fn answer_once(
    settings: &Settings,
    order: &mut Order,
    kind: &ChallengeType,
) -> Result<Option<String>, Error> {
    let mut authorizations = order.authorizations();
    while let Some(authorization) = authorizations.next().await {
        let mut authorization = authorization?;
        match authorization.status {
            AuthorizationStatus::Pending => {}
            AuthorizationStatus::Valid => continue,
            status => return Ok(Some(format!("the authorization is {status:?}"))),
        }
        let Some(mut challenge) = authorization.challenge(kind.clone()) else {
            return Ok(Some(format!("the CA offers no {kind:?} challenge")));
        };
        let key_authorization = challenge.key_authorization();
        match settings.challenge {
            Challenge::Http01 => settings
                .challenges
                .answer_http01(&challenge.token, key_authorization.as_str()),
            Challenge::TlsAlpn01 => {
                let digest = key_authorization.digest();
                if let Err(why) = settings
                    .challenges
                    .answer_alpn(&settings.domain, digest.as_ref())
                {
                    return Ok(Some(why));
                }
            }
        }
        again!(challenge.set_ready())?;
    }
    Ok(None)
}

/// Waits for the order to be ready, sends the request, fetches the chain.
async fn finish(order: &mut Order) -> Result<Issued, String> {
    let mut pause = FIRST_PAUSE;
    let mut ready = false;
    for _ in 0..POLLS {
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_PAUSE);
        let state = again!(order.refresh())
            .map_err(|e| format!("cannot follow the order: {}", words(&e)))?;
        match state.status {
            OrderStatus::Ready | OrderStatus::Valid => {
                ready = true;
                break;
            }
            OrderStatus::Invalid => return Err(invalid(order).await),
            OrderStatus::Pending | OrderStatus::Processing => {}
        }
    }
    if !ready {
        return Err("the CA did not validate the challenge in time".into());
    }
    let key =
        again!(order.finalize()).map_err(|e| format!("cannot send the request: {}", words(&e)))?;
    let mut pause = FIRST_PAUSE;
    for _ in 0..POLLS {
        match again!(order.certificate()) {
            Ok(Some(chain)) => return Ok(Issued { chain, key }),
            Ok(None) => {}
            Err(e) => return Err(format!("cannot fetch the certificate: {}", words(&e))),
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_PAUSE);
    }
    Err("the CA did not issue the certificate in time".into())
}

/// Why an order went invalid before its request (so its validation
/// failed): the challenge's error as the CA says it, else the order's.
async fn invalid(order: &mut Order) -> String {
    let mut why = match &order.state().error {
        Some(problem) => words(&Error::Api(problem.clone())),
        None => "the CA gave no reason".to_string(),
    };
    let mut authorizations = order.authorizations();
    while let Some(Ok(mut authorization)) = authorizations.next().await {
        if again!(authorization.refresh()).is_err() {
            break;
        }
        let failed = authorization
            .challenges
            .iter()
            .find_map(|c| c.error.clone());
        if let Some(problem) = failed {
            why = words(&Error::Api(problem));
        }
    }
    format!("the challenge failed: {why}")
}
