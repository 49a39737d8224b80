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
/// error: without a device there is nothing to listen or speak with. To
/// show what there is (possibly nothing), use [`available`].
pub fn list() -> Result<Vec<DeviceInfo>, VoiceError> {
    let out = available()?;
    if out.is_empty() {
        return Err(no_device());
    }
    Ok(out)
}

/// The error for a machine with no usable sound device.
pub fn no_device() -> VoiceError {
    VoiceError::Device(format!(
        "no sound device found ({} host): connect a microphone or speaker, or use the WAV-file commands",
        cpal::default_host().id().name()
    ))
}

/// Every usable input and output device of the default host; an empty list
/// when the machine has none (an answer, not an error). Fails only when the
/// host cannot be asked at all.
pub fn available() -> Result<Vec<DeviceInfo>, VoiceError> {
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
    Ok(out)
}

/// Which way a chosen device must work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Input,
    Output,
}

/// Chooses a device from `devices`: the one named by `id`, else the
/// default for `direction`, else the first that works that way. A clear
/// error when none does, or when `id` names no such device.
pub fn choose(devices: &[DeviceInfo], id: Option<&str>, direction: Direction) -> Result<DeviceInfo, VoiceError> {
    let works = |d: &&DeviceInfo| match direction {
        Direction::Input => d.input,
        Direction::Output => d.output,
    };
    let what = match direction {
        Direction::Input => "microphone",
        Direction::Output => "speaker",
    };
    if let Some(id) = id {
        return devices.iter().filter(works).find(|d| d.id == id).cloned().ok_or_else(|| {
            VoiceError::Device(format!("no {what} with id {id}; `ledgermind voice devices` lists them"))
        });
    }
    let is_default = |d: &&DeviceInfo| match direction {
        Direction::Input => d.default_input,
        Direction::Output => d.default_output,
    };
    devices
        .iter()
        .filter(works)
        .find(is_default)
        .or_else(|| devices.iter().find(works))
        .cloned()
        .ok_or_else(|| VoiceError::Device(format!("no {what} found: connect one, or use the WAV-file commands")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(id: &str, input: bool, output: bool, default_input: bool) -> DeviceInfo {
        DeviceInfo { id: id.into(), name: id.into(), input, output, default_input, default_output: false }
    }

    #[test]
    fn the_default_is_chosen_then_the_first_that_works_and_none_is_a_clear_error() {
        let devs = vec![dev("alsa:a", false, true, false), dev("alsa:b", true, false, false), dev("alsa:c", true, true, true)];
        assert_eq!(choose(&devs, None, Direction::Input).expect("default").id, "alsa:c");
        assert_eq!(choose(&devs, Some("alsa:b"), Direction::Input).expect("named").id, "alsa:b");
        assert_eq!(choose(&devs, None, Direction::Output).expect("first").id, "alsa:a");
        let e = choose(&devs, Some("alsa:a"), Direction::Input).expect_err("an output only");
        assert!(e.to_string().contains("no microphone with id alsa:a"), "{e}");
        let e = choose(&[], None, Direction::Input).expect_err("nothing");
        assert!(e.to_string().contains("no microphone found"), "{e}");
        assert_eq!(e.code(), "VOICE_DEVICE_UNAVAILABLE");
    }
}
