//! Derived tables as configured: `[[derive]]` in the config file, or `--derive`,
//! `--derive-sql` and `--derive-key`, and their validation (not their queries: those are
//! planned against the raw table once it is open, see `crate::open`).

use serde::Deserialize;

use crate::exit::usage;

/// One derived table as configured.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeriveConfig {
    /// Names the table in logs and errors.
    pub name: String,
    /// Where the derived table lives (path or URL).
    pub table: String,
    /// The query over `window` (one window of the raw table).
    pub sql: String,
    /// Output columns identifying a row within a window: publish by MERGE on them.
    #[serde(default)]
    pub key: Vec<String>,
}

/// Derived tables declared as flags: `--derive NAME=LOCATION`.
pub fn tables_from_flags(tables: &[String]) -> anyhow::Result<Vec<DeriveConfig>> {
    let mut out: Vec<DeriveConfig> = Vec::new();
    for t in tables {
        let (name, table) = super::values::key_value("--derive", t)?;
        if out.iter().any(|d| d.name == name) {
            return Err(usage(format!("--derive: {name} is given twice")));
        }
        out.push(DeriveConfig {
            name,
            table,
            ..DeriveConfig::default()
        });
    }
    Ok(out)
}

/// Applies `--derive-sql NAME=SQL` and `--derive-key NAME=FIELD[,FIELD]` to the derived
/// tables declared by flags or in the config file.
pub fn apply_flags(
    derive: &mut [DeriveConfig],
    sqls: &[String],
    keys: &[String],
) -> anyhow::Result<()> {
    let find = |flag: &str, text: &str| -> anyhow::Result<(usize, String)> {
        let (name, value) = super::values::key_value(flag, text)?;
        let i = derive.iter().position(|d| d.name == name).ok_or_else(|| {
            usage(format!(
                "{flag}: no derived table {name}; declare it with --derive {name}=LOCATION or in the config file"
            ))
        })?;
        Ok((i, value))
    };
    let mut sql_at = Vec::new();
    for s in sqls {
        sql_at.push(find("--derive-sql", s)?);
    }
    let mut key_at = Vec::new();
    for k in keys {
        key_at.push(find("--derive-key", k)?);
    }
    for (i, sql) in sql_at {
        derive[i].sql = sql;
    }
    for (i, key) in key_at {
        derive[i].key = key.split(',').map(|c| c.trim().to_string()).collect();
    }
    Ok(())
}

/// Checks the derived tables' options (not their queries: those are planned against the raw
/// table once it is open).
pub fn check(derive: &[DeriveConfig], taken: &[&str]) -> anyhow::Result<()> {
    for (i, d) in derive.iter().enumerate() {
        let valid_name = !d.name.is_empty()
            && d.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            return Err(usage(format!(
                "derived table {:?}: use a name of letters, digits, _ and -",
                d.name
            )));
        }
        if derive[..i].iter().any(|e| e.name == d.name) {
            return Err(usage(format!("derived table {}: named twice", d.name)));
        }
        if d.table.is_empty() {
            return Err(usage(format!(
                "derived table {}: no table location",
                d.name
            )));
        }
        if d.sql.trim().is_empty() {
            return Err(usage(format!(
                "derived table {}: no query (sql, or --derive-sql {}=SQL)",
                d.name, d.name
            )));
        }
        if d.key.iter().any(String::is_empty) {
            return Err(usage(format!("derived table {}: empty key column", d.name)));
        }
        let same_place = |a: &str| a.trim_end_matches('/') == d.table.trim_end_matches('/');
        if taken.iter().any(|t| same_place(t)) || derive[..i].iter().any(|e| same_place(&e.table)) {
            return Err(usage(format!(
                "derived table {}: {} is already the raw, dead-letter or another derived table",
                d.name, d.table
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::args::RunArgs;

    #[test]
    fn derived_tables_from_the_config_file_and_flags() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("p.toml");
        std::fs::write(
            &cfg,
            "source = \"ndjson:in\"\ntable = \"t\"\n\
             [[derive]]\nname = \"rev\"\ntable = \"t_rev\"\nsql = \"SELECT 1 AS one FROM window\"\n\
             [[derive]]\nname = \"kinds\"\ntable = \"t_kinds\"\nsql = \"SELECT kind FROM window\"\nkey = [\"kind\"]\n",
        )
        .unwrap();
        let args = RunArgs {
            config: Some(cfg.clone()),
            derive_tables: vec!["extra=t_extra".into()],
            derive_sql: vec![
                "extra=SELECT 2 AS two FROM window".into(),
                "rev=SELECT 3 AS three FROM window".into(),
            ],
            derive_key: vec!["extra=two".into()],
            ..Default::default()
        };
        let settings = args.settings().unwrap();
        let names: Vec<&str> = settings.derive.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["extra", "rev", "kinds"]);
        assert_eq!(settings.derive[0].key, ["two"]);
        assert_eq!(
            settings.derive[1].sql, "SELECT 3 AS three FROM window",
            "a flag wins"
        );
        assert_eq!(settings.derive[2].key, ["kind"]);

        let bad = |derive_tables: Vec<&str>, derive_sql: Vec<&str>| {
            RunArgs {
                source: Some("ndjson:in".into()),
                table: Some("t".into()),
                derive_tables: derive_tables.into_iter().map(String::from).collect(),
                derive_sql: derive_sql.into_iter().map(String::from).collect(),
                ..Default::default()
            }
            .settings()
            .unwrap_err()
            .to_string()
        };
        assert!(bad(vec!["a=x"], vec![]).contains("no query"));
        assert!(bad(vec!["a=x"], vec!["b=SELECT 1"]).contains("no derived table b"));
        assert!(bad(vec!["a=t"], vec!["a=SELECT 1"]).contains("already the raw"));
        assert!(bad(vec!["a=x", "a=y"], vec![]).contains("given twice"));
        assert!(bad(vec!["a b=x"], vec!["a b=SELECT 1"]).contains("use a name"));
        assert!(bad(vec!["x"], vec![]).contains("expected KEY=VALUE"));
    }
}
