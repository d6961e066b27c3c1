//! The conversions between their units and ours: memory sizes (`2G`, `512M`) to MiB, CPU units,
//! Fargate sizes rounded up to one Fargate takes, and which of our launch types an elastic profile
//! of theirs runs on (`Fargate`, `RunAsSpotInstance`, `Platform`).

use crate::settings::fargate_size_at_least;

/// Parses a size as their plugin does (`size/Size.java`: a whole number, optional blanks, a unit
/// of B, K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB or the words, any case; 1024-based) into
/// MiB, rounded up to a whole MiB.
///
/// # Errors
/// A sentence saying why the text is not such a size.
pub fn size_to_mib(text: &str) -> Result<u32, String> {
    let text = text.trim();
    let digits = text.chars().take_while(char::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let unit = unit.trim();
    if number.is_empty() || unit.is_empty() || unit.contains(char::is_whitespace) {
        return Err(format!("`{text}` is not a size like 2G or 512M"));
    }
    let count: u64 = number.parse().map_err(|_| format!("`{text}` is too large"))?;
    let bytes_per_unit: u64 = match unit.to_ascii_lowercase().as_str() {
        "b" | "byte" | "bytes" => 1,
        "k" | "kb" | "kib" | "kilobyte" | "kilobytes" => 1 << 10,
        "m" | "mb" | "mib" | "megabyte" | "megabytes" => 1 << 20,
        "g" | "gb" | "gib" | "gigabyte" | "gigabytes" => 1 << 30,
        "t" | "tb" | "tib" | "terabyte" | "terabytes" => 1 << 40,
        _ => return Err(format!("`{text}`: unknown unit `{unit}` (B, K, M, G or T)")),
    };
    let bytes = count.checked_mul(bytes_per_unit).ok_or_else(|| format!("`{text}` is too large"))?;
    u32::try_from(bytes.div_ceil(1 << 20)).map_err(|_| format!("`{text}` is too large"))
}

/// Their `CPU`: ECS CPU units (1024 = 1 vCPU), as ours. `Ok(None)` for 0 or empty, which in ECS
/// reserves no CPU and for which ours has no value (its default applies).
///
/// # Errors
/// When the text is not a whole number.
pub fn cpu_units(text: &str) -> Result<Option<u32>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let units: u32 = text.parse().map_err(|_| format!("`{text}` is not a whole number of CPU units"))?;
    Ok((units > 0).then_some(units))
}

/// A size Fargate takes for at least `cpu` units and `memory` MiB, and whether it had to change.
///
/// # Errors
/// When it is larger than Fargate's largest size.
pub fn fargate_size(cpu: u32, memory: u32) -> Result<((u32, u32), bool), String> {
    match fargate_size_at_least(cpu, memory) {
        Some(size) => Ok((size, size != (cpu, memory))),
        None => Err(format!("Cpu {cpu} with Memory {memory} MiB is larger than any Fargate size")),
    }
}

/// Where an agent of theirs runs in our terms: the cluster profile's `LaunchType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Launch {
    /// `Fargate` true.
    Fargate,
    /// `Fargate` and `RunAsSpotInstance` true.
    FargateSpot,
    /// EC2 on-demand instances.
    Ec2,
    /// EC2 spot instances (`RunAsSpotInstance`).
    Ec2Spot,
}

impl Launch {
    /// The `LaunchType` value.
    pub fn launch_type(self) -> &'static str {
        match self {
            Launch::Fargate => "FARGATE",
            Launch::FargateSpot => "FARGATE_SPOT",
            Launch::Ec2 | Launch::Ec2Spot => "EC2",
        }
    }

    /// EC2 instances of the plugin's own.
    pub fn is_ec2(self) -> bool {
        matches!(self, Launch::Ec2 | Launch::Ec2Spot)
    }
}

/// Our cluster profile for one of their elastic profiles: where it runs, and whether its EC2
/// instances are Windows ones (their cluster profile has separate Windows AMI, type and limits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Variant {
    /// The launch type.
    pub launch: Launch,
    /// Windows instances (EC2 only; on Fargate the elastic profile alone says Windows).
    pub windows: bool,
}

impl Variant {
    /// From their elastic profile's `Fargate`, `RunAsSpotInstance` and `Platform` (WINDOWS or
    /// not), with a sentence when their choice cannot be kept as it is.
    pub fn of(fargate: bool, spot: bool, windows: bool) -> (Variant, Option<String>) {
        match (fargate, spot) {
            (true, true) if windows => (
                Variant { launch: Launch::Fargate, windows: false },
                Some("Windows tasks cannot run on FARGATE_SPOT: this one runs on FARGATE".to_string()),
            ),
            (true, true) => (Variant { launch: Launch::FargateSpot, windows: false }, None),
            (true, false) => (Variant { launch: Launch::Fargate, windows: false }, None),
            (false, true) => (Variant { launch: Launch::Ec2Spot, windows }, None),
            (false, false) => (Variant { launch: Launch::Ec2, windows }, None),
        }
    }

    /// The suffix of our cluster profile's id: `fargate`, `fargate-spot`, `ec2`, `ec2-spot`,
    /// `ec2-windows`, `ec2-windows-spot`.
    pub fn suffix(self) -> &'static str {
        match (self.launch, self.windows) {
            (Launch::Fargate, _) => "fargate",
            (Launch::FargateSpot, _) => "fargate-spot",
            (Launch::Ec2, false) => "ec2",
            (Launch::Ec2Spot, false) => "ec2-spot",
            (Launch::Ec2, true) => "ec2-windows",
            (Launch::Ec2Spot, true) => "ec2-windows-spot",
        }
    }
}

/// Java's `Boolean.parseBoolean`, as their plugin reads its flags: `true` in any case, else false.
pub fn java_bool(text: Option<&str>) -> bool {
    text.is_some_and(|t| t.trim().eq_ignore_ascii_case("true"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_their_units_in_mib() {
        assert_eq!(size_to_mib("2G"), Ok(2048));
        assert_eq!(size_to_mib("512M"), Ok(512));
        assert_eq!(size_to_mib("512mb"), Ok(512));
        assert_eq!(size_to_mib("1 GiB"), Ok(1024));
        assert_eq!(size_to_mib("3 gigabytes"), Ok(3072));
        assert_eq!(size_to_mib("1T"), Ok(1_048_576));
        assert_eq!(size_to_mib("1536K"), Ok(2), "rounded up to whole MiB");
        assert!(size_to_mib("2048").unwrap_err().contains("not a size"), "a unit is required, as theirs");
        assert!(size_to_mib("1.5G").is_err(), "their parser takes whole numbers only");
        assert!(size_to_mib("2Q").unwrap_err().contains("unknown unit"));
        assert!(size_to_mib("").is_err());
        assert!(size_to_mib("99999999999T").is_err());
    }

    #[test]
    fn cpu_units_are_kept_and_zero_means_none() {
        assert_eq!(cpu_units("1024"), Ok(Some(1024)));
        assert_eq!(cpu_units(" 256 "), Ok(Some(256)));
        assert_eq!(cpu_units("0"), Ok(None));
        assert_eq!(cpu_units(""), Ok(None));
        assert!(cpu_units("1.5").is_err());
    }

    #[test]
    fn fargate_sizes_round_up_to_the_next_valid_pair() {
        assert_eq!(fargate_size(1024, 2048), Ok(((1024, 2048), false)));
        assert_eq!(fargate_size(1024, 3000), Ok(((1024, 3072), true)));
        assert_eq!(fargate_size(1024, 512), Ok(((1024, 2048), true)), "memory up to the CPU's least");
        assert_eq!(fargate_size(300, 512), Ok(((512, 1024), true)), "CPU up to the next Fargate CPU");
        assert_eq!(fargate_size(256, 3000), Ok(((512, 3072), true)), "past a CPU's most memory: the next CPU");
        assert_eq!(fargate_size(100, 100), Ok(((256, 512), true)));
        assert_eq!(fargate_size(8192, 20000), Ok(((8192, 20480), true)), "steps of 4096 at 8 vCPU");
        assert!(fargate_size(16384, 200_000).is_err());
        assert!(fargate_size(20000, 1024).is_err());
    }

    #[test]
    fn launch_types_split_by_fargate_spot_and_platform() {
        let v = |f, s, w| Variant::of(f, s, w).0;
        assert_eq!(v(true, false, false).launch.launch_type(), "FARGATE");
        assert_eq!(v(true, true, false).launch.launch_type(), "FARGATE_SPOT");
        assert_eq!(v(false, false, false).suffix(), "ec2");
        assert_eq!(v(false, true, false).suffix(), "ec2-spot");
        assert_eq!(v(false, false, true).suffix(), "ec2-windows");
        assert_eq!(v(false, true, true).suffix(), "ec2-windows-spot");
        assert_eq!(v(true, false, true).suffix(), "fargate", "on Fargate the OS is the elastic profile's");
        let (windows_spot, note) = Variant::of(true, true, true);
        assert_eq!(windows_spot.launch, Launch::Fargate);
        assert!(note.unwrap().contains("FARGATE_SPOT"));
        assert!(java_bool(Some("TRUE")) && !java_bool(Some("yes")) && !java_bool(None));
    }
}
