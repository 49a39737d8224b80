//! Who may use a document: group visibility, as memories have. Apart from
//! the citations so that the library's search and the citations both use
//! it without importing each other.

/// Which documents a reader may use. A document filed under no group is
/// everyone's; one filed under groups is for the personas of those groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visibility {
    /// Every document (the person, and the system persona).
    All,
    /// Documents filed under none of the groups, or under one of these.
    Groups(Vec<String>),
}

impl Visibility {
    pub fn allows(&self, document_groups: &[String]) -> bool {
        match self {
            Self::All => true,
            Self::Groups(mine) => document_groups.is_empty() || document_groups.iter().any(|g| mine.contains(g)),
        }
    }
}

/// The stored comma-separated groups as a list.
pub(crate) fn groups_of(stored: Option<String>) -> Vec<String> {
    stored
        .map(|s| s.split(',').map(str::trim).filter(|g| !g.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_without_groups_is_everyones_and_one_with_groups_is_theirs() {
        let family = Visibility::Groups(vec!["family".into()]);
        assert!(family.allows(&[]));
        assert!(family.allows(&["work".into(), "family".into()]));
        assert!(!family.allows(&["work".into()]));
        assert!(Visibility::All.allows(&["work".into()]));
        assert_eq!(groups_of(Some(" work, ,family".into())), ["work", "family"]);
        assert!(groups_of(None).is_empty());
    }
}
