//! `[server_card]`: the identity the MCP server card gives this server,
//! and the card's own limits on it.

use serde::{Deserialize, Serialize};

/// `[server_card]`: the identity the MCP server card gives this server
/// (the card's own fields, MCP server-card extension v1). Every member is
/// optional; unset ones are derived (name from the public URL's host,
/// title and description the product's).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ServerCardSettings {
    /// Reverse-DNS name with one `/` (`com.example/pilotage`). Default:
    /// the public URL's host reversed, then `/pilotage`.
    pub name: Option<String>,
    /// Display name, at most 100 characters. Default `Pilotage Platform`.
    pub title: Option<String>,
    /// What the server is for, 1–100 characters.
    pub description: Option<String>,
    /// The operator's page about this server (an http(s) URL).
    pub website_url: Option<String>,
    /// Icons (`src` an https or data URL, `mime_type`, `sizes` such as
    /// `48x48`).
    pub icons: Vec<CardIcon>,
}

/// One icon of the server card.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CardIcon {
    /// An `https:` or `data:` URL.
    pub src: String,
    /// Its media type (`image/png`, `image/svg+xml`).
    #[serde(default)]
    pub mime_type: Option<String>,
    /// Sizes it suits (`48x48`, `any`).
    #[serde(default)]
    pub sizes: Vec<String>,
}

impl ServerCardSettings {
    /// Checks the members against the card's own limits.
    ///
    /// # Errors
    /// `(field, message)` for the first member the card would not accept.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if let Some(name) = &self.name {
            let parts: Vec<&str> = name.split('/').collect();
            let namespace = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == '-';
            let valid = (3..=200).contains(&name.len())
                && parts.len() == 2
                && !parts[0].is_empty()
                && !parts[1].is_empty()
                && parts[0].chars().all(namespace)
                && parts[1].chars().all(|c| namespace(c) || c == '_');
            if !valid {
                return Err(("server_card.name", format!("'{name}' is not a reverse-DNS name with one '/'")));
            }
        }
        for (field, text) in [("server_card.title", &self.title), ("server_card.description", &self.description)] {
            if text.as_ref().is_some_and(|text| text.is_empty() || text.chars().count() > 100) {
                return Err((field, "1 to 100 characters".to_owned()));
            }
        }
        if let Some(url) = &self.website_url
            && !reqwest::Url::parse(url).is_ok_and(|url| url.scheme() == "https" || url.scheme() == "http")
        {
            return Err(("server_card.website_url", format!("'{url}' is not an http(s) URL")));
        }
        if let Some(icon) =
            self.icons.iter().find(|icon| !(icon.src.starts_with("https://") || icon.src.starts_with("data:")))
        {
            return Err(("server_card.icons", format!("'{}' is neither an https nor a data URL", icon.src)));
        }
        Ok(())
    }
}
