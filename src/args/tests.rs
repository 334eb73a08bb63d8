//! Option resolution: defaults, the config file, and what each source refuses.

use sluice_ingest::{defaults, LatePolicy, PublishMode};
use sluice_source::kafka::StartAt;
use sluice_window::{parse_duration_ms, WindowSize};

use super::values::{parse_bytes, parse_ratio};
use super::*;

/// Every default `--help` shows is the one the run resolves with (`sluice_ingest::defaults`,
/// defined once), and each one parses.
#[test]
fn the_help_shows_the_defaults_the_run_uses() {
    use clap::{CommandFactory, Parser};
    #[derive(Parser)]
    struct Help {
        #[command(flatten)]
        run: RunArgs,
    }
    let command = Help::command();
    let help_of = |id: &str| -> String {
        let arg = command
            .get_arguments()
            .find(|a| a.get_id() == id)
            .unwrap_or_else(|| panic!("no argument {id}"));
        let text = arg.get_long_help().or(arg.get_help()).unwrap().to_string();
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let expected: [(&str, String); 26] = [
        ("pipeline", defaults::PIPELINE.into()),
        ("pipelines", defaults::PIPELINES.into()),
        ("time_field", defaults::TIME_FIELD.into()),
        ("time_format", defaults::TIME_FORMAT.into()),
        ("time_zone", defaults::TIME_ZONE.into()),
        ("max_time_ahead", defaults::MAX_TIME_AHEAD.into()),
        ("time_jump_events", defaults::TIME_JUMP_EVENTS.to_string()),
        ("columns_max", defaults::COLUMNS_MAX.to_string()),
        ("window", defaults::WINDOW.into()),
        ("lateness", defaults::LATENESS.into()),
        ("mode", defaults::MODE.into()),
        ("merge_scope", defaults::MERGE_SCOPE.into()),
        ("infer_lines", defaults::INFER_LINES.to_string()),
        ("late", defaults::LATE.into()),
        ("late_batch", defaults::LATE_BATCH.into()),
        ("poll_interval", defaults::POLL_INTERVAL.into()),
        ("flush_bytes_max", defaults::FLUSH_BYTES_MAX.into()),
        ("chunk_bytes", defaults::CHUNK_BYTES.into()),
        ("decode_threads", defaults::DECODE_THREADS.to_string()),
        ("compression", defaults::COMPRESSION.into()),
        (
            "checkpoint_interval",
            defaults::CHECKPOINT_INTERVAL.to_string(),
        ),
        (
            "store_attempts_max",
            defaults::STORE_ATTEMPTS_MAX.to_string(),
        ),
        ("restarts_max", defaults::RESTARTS_MAX.to_string()),
        ("group_windows_max", defaults::GROUP_WINDOWS_MAX.to_string()),
        ("start", defaults::START.into()),
        ("max_reject_ratio", defaults::MAX_REJECT_RATIO.into()),
    ];
    for (id, default) in expected {
        let help = help_of(id);
        assert!(
            help.contains(&format!("[default: {default}]")),
            "--{id}: the help says {help:?}, the run uses {default}"
        );
    }
    // The defaults are the settings of a run given only its source and table.
    let args = Help::parse_from(["sluice", "--source", "ndjson:in", "--table", "t"]).run;
    assert!(args.config.is_none());
    let s = args.settings().unwrap();
    assert_eq!(s.pipeline, defaults::PIPELINE);
    assert_eq!(s.time_field, defaults::TIME_FIELD);
    assert_eq!(s.window, WindowSize::parse(defaults::WINDOW).unwrap());
    assert_eq!(
        s.lateness_ms,
        parse_duration_ms(defaults::LATENESS).unwrap()
    );
    assert_eq!(
        s.late_batch_ms,
        parse_duration_ms(defaults::LATE_BATCH).unwrap()
    );
    assert_eq!(
        s.tuning.flush_bytes_max,
        parse_bytes(defaults::FLUSH_BYTES_MAX).unwrap()
    );
    assert_eq!(
        s.tuning.chunk_bytes,
        parse_bytes(defaults::CHUNK_BYTES).unwrap()
    );
    assert_eq!(s.tuning.decode_threads, defaults::DECODE_THREADS);
    assert_eq!(s.tuning.checkpoint_interval, defaults::CHECKPOINT_INTERVAL);
    assert_eq!(s.tuning.store_attempts_max, defaults::STORE_ATTEMPTS_MAX);
    assert_eq!(s.tuning.restarts_max, defaults::RESTARTS_MAX);
    assert_eq!(s.tuning.group_windows_max, defaults::GROUP_WINDOWS_MAX);
    assert_eq!(s.infer_lines, defaults::INFER_LINES);
    assert_eq!(s.columns_max, defaults::COLUMNS_MAX);
    assert_eq!(s.late, LatePolicy::parse_name(defaults::LATE).unwrap());
    assert_eq!(s.mode, PublishMode::Swap);
}

#[test]
fn sizes_parse() {
    assert_eq!(parse_bytes("256MiB"), Some(256 << 20));
    assert_eq!(parse_bytes("64MB"), Some(64_000_000));
    assert_eq!(parse_bytes("4096"), Some(4096));
    assert_eq!(parse_bytes("12 parsecs"), None);
    assert_eq!(parse_bytes("MiB"), None);
}

#[test]
fn flags_win_over_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("p.toml");
    std::fs::write(
        &cfg,
        "source = \"ndjson:in\"\ntable = \"t\"\nwindow = \"15m\"\nkey = \"id\"\n",
    )
    .unwrap();
    let args = RunArgs {
        config: Some(cfg.clone()),
        window: Some("1h".into()),
        ..Default::default()
    };
    let settings = args.settings().unwrap();
    assert_eq!(settings.window, WindowSize::parse("1h").unwrap());
    // The file's paths are relative to the file.
    let table = dir.path().join("t").display().to_string();
    assert_eq!(settings.table, table);
    assert_eq!(settings.source, dir.path().join("in"));
    assert_eq!(settings.key.unwrap().columns, vec!["id".to_string()]);
    assert_eq!(settings.dlq, format!("{table}_dlq"));
    assert_eq!(settings.late, LatePolicy::Rewrite);

    std::fs::write(&cfg, "sorce = \"x\"\n").unwrap();
    let err = RunArgs {
        config: Some(cfg),
        ..Default::default()
    }
    .settings()
    .unwrap_err();
    assert!(err.to_string().contains("sorce"), "{err}");
}

#[test]
fn kafka_sources_take_their_options_and_refuse_what_does_not_apply() {
    let settings = |source: &str, extra: &dyn Fn(&mut RunArgs)| {
        let mut args = RunArgs {
            source: Some(source.into()),
            table: Some("t".into()),
            ..Default::default()
        };
        extra(&mut args);
        args.settings()
    };
    let p = settings("kafka:events", &|a| {
        a.brokers = Some("127.0.0.1:9092".into());
        a.until_idle = Some("30s".into());
        a.idle_timeout = Some("5m".into());
        a.kafka_options = vec!["fetch.min.bytes=1".into()];
    })
    .unwrap();
    let k = p.kafka.unwrap();
    assert_eq!((k.topic.as_str(), k.group.as_str()), ("events", "sluice"));
    assert_eq!(k.until_idle_ms, Some(30_000));
    assert_eq!(k.idle_timeout_ms, Some(300_000));
    assert_eq!(k.start, StartAt::Earliest);
    assert_eq!(
        k.client_options,
        vec![("fetch.min.bytes".into(), "1".into())]
    );
    let err = |source: &str, extra: &dyn Fn(&mut RunArgs)| {
        settings(source, extra).unwrap_err().to_string()
    };
    assert!(err("kafka:events", &|_| {}).contains("--brokers"));
    assert!(err("kafka:a/b", &|a| a.brokers = Some("b:1".into())).contains("topic name"));
    assert!(err("ndjson:in", &|a| a.max_events = Some(5)).contains("--max-events"));
    let follow = err("kafka:events", &|a| {
        a.brokers = Some("b:1".into());
        a.follow = true;
    });
    assert!(follow.contains("always followed"), "{follow}");
    let start = err("kafka:events", &|a| {
        a.brokers = Some("b:1".into());
        a.start = Some("middle".into());
    });
    assert!(start.contains("--start"), "{start}");
    let poll = err("kafka:events", &|a| {
        a.brokers = Some("b:1".into());
        a.poll_interval = Some("1s".into());
    });
    assert!(poll.contains("--poll-interval"), "{poll}");
}

#[test]
fn the_metrics_address_is_an_ip_and_port() {
    let settings = |addr: &str| {
        RunArgs {
            source: Some("ndjson:in".into()),
            table: Some("t".into()),
            metrics_addr: Some(addr.into()),
            ..Default::default()
        }
        .settings()
    };
    let ok = settings("127.0.0.1:9464").unwrap();
    assert_eq!(
        ok.output.metrics_addr,
        Some("127.0.0.1:9464".parse().unwrap())
    );
    for bad in ["9464", "localhost:9464", "127.0.0.1", "0.0.0.0:port"] {
        let err = settings(bad).unwrap_err().to_string();
        assert!(
            err.contains("--metrics-addr") && err.contains("HOST:PORT"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn options_left_out_come_from_the_table_and_given_ones_stay() {
    let recorded = sluice_publish::Contract::new()
        .with("window", "90m")
        .with("address", "window_start")
        .with("key", "event_id")
        .with("merge-scope", "")
        .with("late", "drop");
    let mut args = RunArgs {
        late: Some("rewrite".into()),
        ..Default::default()
    };
    args.adopt(&recorded);
    assert_eq!(args.window.as_deref(), Some("90m"));
    assert_eq!(args.address.as_deref(), Some("window_start"));
    assert_eq!(args.key.as_deref(), Some("event_id"));
    assert_eq!(args.merge_scope, None, "an empty term gives nothing");
    assert_eq!(
        args.late.as_deref(),
        Some("rewrite"),
        "a given option stays (and is checked)"
    );
}

#[test]
fn ratios_and_config_positions_parse() {
    assert_eq!(parse_ratio("10%"), Some(0.1));
    assert_eq!(parse_ratio("0.25"), Some(0.25));
    assert_eq!(parse_ratio("150%"), None);
    assert_eq!(parse_ratio("lots"), None);
    assert_eq!(config::line_and_column("a = 1\nb = \n", 10), (2, 5));
}

/// A command that reads tables only (`derive`) resolves no source: a config file made for
/// `run` (a Kafka source and its options, or no source at all) is taken as it is.
#[test]
fn a_command_that_reads_no_source_resolves_none() {
    let args = |source: Option<&str>, reads_no_source: bool| RunArgs {
        source: source.map(String::from),
        table: Some("t".into()),
        max_events: Some(5),
        reads_no_source,
        ..Default::default()
    };
    for source in [None, Some("kafka:events"), Some("ndjson:in")] {
        let s = args(source, true).settings().unwrap();
        assert!(
            s.kafka.is_none() && s.source.as_os_str().is_empty(),
            "{source:?}"
        );
    }
    let err = |source| args(source, false).settings().unwrap_err().to_string();
    assert!(err(None).contains("--source is required"));
    assert!(err(Some("kafka:events")).contains("--brokers"));
    assert!(err(Some("ndjson:in")).contains("--max-events"));
}
