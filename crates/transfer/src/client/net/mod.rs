//! What both stages speak: source URLs ([`url::HttpUrl`]), connections (`conn`), reading
//! responses (`response`), the requests that find files and sizes (`fetch`) and the
//! validators that tell a file's version (`validator`).

pub(crate) mod conn;
pub(crate) mod fetch;
pub(crate) mod response;
pub(crate) mod url;
pub(crate) mod validator;
