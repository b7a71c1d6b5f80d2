//! `CpuModelConfig`: the node's CPU model as configured — what each connection, request and
//! KiB sent costs, and how many modelled CPUs share that work — read from `[cpu]` or a
//! `--cpu` spec string (`lard98`, `request_us=300,kb_us=40`), with its presets and checks.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::preset_spec::{parse_preset_spec, spec_integer, spec_number};

/// The CPU model: with it, a node serves the CPU cost of every request — `conn_us` once per
/// connection, `request_us` per request, `kb_us` per KiB of response body, and a dynamic
/// class's drawn cost — as a processor-sharing queue of `cpus` modelled CPUs: time passes,
/// no CPU is burnt. Without it (the default), dynamic costs burn real CPU.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "CpuModelFields")]
pub struct CpuModelConfig {
    /// Cost of accepting and closing a connection, µs.
    pub conn_us: f64,
    /// Cost of parsing and answering a request, µs.
    pub request_us: f64,
    /// Cost per KiB of response body sent, µs.
    pub kb_us: f64,
    /// Modelled CPUs sharing the work.
    pub cpus: u32,
}

impl CpuModelConfig {
    /// The LARD paper's server (1998): 145 µs to set up and tear down a connection, 40 µs per
    /// 512 bytes sent; one CPU.
    pub fn lard98() -> CpuModelConfig {
        CpuModelConfig { conn_us: 145.0, request_us: 0.0, kb_us: 80.0, cpus: 1 }
    }

    fn preset(name: &str) -> Option<CpuModelConfig> {
        match name {
            "lard98" => Some(CpuModelConfig::lard98()),
            _ => None,
        }
    }

    /// Check the parameters; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
        for (key, v) in [("conn_us", self.conn_us), ("request_us", self.request_us), ("kb_us", self.kb_us)] {
            if !v.is_finite() || !(0.0..=10_000_000.0).contains(&v) {
                return Err(format!("cpu {key} must be within 0..=10000000 µs, not {v}"));
            }
        }
        if self.cpus == 0 || self.cpus > 256 {
            return Err(format!("cpu cpus must be in 1..=256, not {}", self.cpus));
        }
        Ok(())
    }
}

impl Default for CpuModelConfig {
    fn default() -> CpuModelConfig {
        CpuModelConfig::lard98()
    }
}

/// `[cpu]` as written: an optional preset, then explicit fields that override it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CpuModelFields {
    preset: Option<String>,
    conn_us: Option<f64>,
    request_us: Option<f64>,
    kb_us: Option<f64>,
    cpus: Option<u32>,
}

impl TryFrom<CpuModelFields> for CpuModelConfig {
    type Error = String;

    fn try_from(f: CpuModelFields) -> Result<CpuModelConfig, String> {
        let mut c = match f.preset.as_deref() {
            None => CpuModelConfig::lard98(),
            Some(name) => CpuModelConfig::preset(name)
                .ok_or_else(|| format!("unknown cpu preset {name:?}; known presets: lard98"))?,
        };
        c.conn_us = f.conn_us.unwrap_or(c.conn_us);
        c.request_us = f.request_us.unwrap_or(c.request_us);
        c.kb_us = f.kb_us.unwrap_or(c.kb_us);
        c.cpus = f.cpus.unwrap_or(c.cpus);
        c.validate()?;
        Ok(c)
    }
}

impl FromStr for CpuModelConfig {
    type Err = String;

    /// `"lard98"`, or `key=value` pairs separated by commas, optionally after a preset:
    /// `"conn_us=100,request_us=300,kb_us=40,cpus=1"`, `"lard98,request_us=145"`.
    fn from_str(s: &str) -> Result<CpuModelConfig, String> {
        let c = parse_preset_spec(
            s,
            "cpu",
            CpuModelConfig::lard98(),
            CpuModelConfig::preset,
            |c, key, value, item| {
                match key {
                    "conn_us" => c.conn_us = spec_number(value, item)?,
                    "request_us" => c.request_us = spec_number(value, item)?,
                    "kb_us" => c.kb_us = spec_number(value, item)?,
                    "cpus" => c.cpus = spec_integer(value, item)?,
                    other => {
                        return Err(format!("unknown cpu key {other:?} (conn_us, request_us, kb_us, cpus)"));
                    }
                }
                Ok(())
            },
        )?;
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_start_from_a_preset_and_override_keys() {
        assert_eq!("lard98".parse::<CpuModelConfig>(), Ok(CpuModelConfig::lard98()));
        let c: CpuModelConfig = "lard98,request_us=145,cpus=2".parse().unwrap();
        assert_eq!(c, CpuModelConfig { request_us: 145.0, cpus: 2, ..CpuModelConfig::lard98() });
        let c: CpuModelConfig = "conn_us=0, request_us=300 ,kb_us=40".parse().unwrap();
        assert_eq!((c.conn_us, c.request_us, c.kb_us, c.cpus), (0.0, 300.0, 40.0, 1));
    }

    #[test]
    fn nonsense_specs_are_refused_naming_the_key() {
        for (spec, key) in [
            ("kb_us=-1", "kb_us"),
            ("request_us=NaN", "request_us"),
            ("cpus=0", "cpus"),
            ("ghz=3", "ghz"),
            ("conn_us=x", "conn_us"),
            ("pentium", "pentium"),
        ] {
            let e = spec.parse::<CpuModelConfig>().unwrap_err();
            assert!(e.contains(key), "{spec}: {e}");
        }
    }

    #[test]
    fn a_cpu_table_refuses_a_negative_cost_with_its_line() {
        #[derive(Deserialize)]
        struct T {
            #[allow(dead_code)]
            cpu: CpuModelConfig,
        }
        let e = toml::from_str::<T>("\n[cpu]\nkb_us = -3\n").err().unwrap().to_string();
        assert!(e.contains("kb_us") && e.contains("line 2"), "{e}");
        let t: T = toml::from_str("[cpu]\npreset = \"lard98\"\nrequest_us = 50\n").unwrap();
        assert_eq!(t.cpu.request_us, 50.0);
    }
}
