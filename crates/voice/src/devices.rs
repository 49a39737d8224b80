//! Listing the machine's sound devices (cpal: ALSA on Linux).

use cpal::traits::{DeviceTrait, HostTrait};
use serde::Serialize;

use crate::error::VoiceError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceInfo {
    /// Stable id to choose the device with (`host:device`).
    pub id: String,
    pub name: String,
    pub input: bool,
    pub output: bool,
    pub default_input: bool,
    pub default_output: bool,
}

/// ALSA's "null" sink swallows audio; it is not a device anyone can use.
fn is_placeholder(id: &str) -> bool {
    id.ends_with(":null")
}

/// Every input and output device of the default host. An empty list is an
/// error: without a device there is nothing to listen or speak with.
pub fn list() -> Result<Vec<DeviceInfo>, VoiceError> {
    let host = cpal::default_host();
    let id_of = |d: &cpal::Device| d.id().map(|i| i.to_string()).unwrap_or_default();
    let default_in = host.default_input_device().map(|d| id_of(&d));
    let default_out = host.default_output_device().map(|d| id_of(&d));
    let devices = host.devices().map_err(|e| VoiceError::Device(format!("cannot list sound devices: {e}")))?;
    let mut out = Vec::new();
    for d in devices {
        let id = id_of(&d);
        if id.is_empty() || is_placeholder(&id) {
            continue;
        }
        let name = d.description().map(|desc| desc.name().to_owned()).unwrap_or_else(|_| id.clone());
        out.push(DeviceInfo {
            default_input: default_in.as_deref() == Some(id.as_str()),
            default_output: default_out.as_deref() == Some(id.as_str()),
            input: d.supports_input(),
            output: d.supports_output(),
            name,
            id,
        });
    }
    if out.is_empty() {
        return Err(VoiceError::Device(format!(
            "no sound device found ({} host): connect a microphone or speaker, or use the WAV-file commands",
            host.id().name()
        )));
    }
    Ok(out)
}
