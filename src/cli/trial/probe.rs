//! The probe `try` runs inside its task when it has a GoCD server URL: what the agent does
//! first, from where agents run. The task's agent container gets a command override, a small
//! POSIX shell script, in place of the agent: it makes the agent's first request,
//! `GET <server>/admin/latest-agent.status` (a GoCD server answers it with the agent's checksum
//! headers, `Agent-Content-MD5` among them), then opens a TCP connection to each material host
//! it is given, and exits with a status that names what failed. `try` reads that status from
//! ECS (the container's `exitCode` in DescribeTasks): no log group is needed.
//!
//! The script needs `sh` and `curl`, which the official GoCD agent images carry. Its exit
//! statuses are the contract between the script and [`Outcome::of_exit`]; a test runs the
//! script itself against local servers to hold it to that contract.

use super::class::{Class, Failed};

/// The probe's environment: the server URL (ending in `/go`).
pub const SERVER_URL_VAR: &str = "ECS_EA_PROBE_SERVER_URL";

/// The probe's environment: the material hosts, `host:port` separated by spaces.
pub const MATERIALS_VAR: &str = "ECS_EA_PROBE_MATERIALS";

/// The probe. `curl`'s own exit statuses tell a name that does not resolve (6), a connection
/// refused or timed out (7, 28) and a TLS failure (35, 51, 53, 54, 58, 59, 60, 77, 80, 82, 83,
/// 90, 91) apart; `-w` prints the status code, and `-D` keeps the headers to look for GoCD's.
/// A material host counts as reachable when curl connected (`time_connect` is not zero),
/// whatever the host then answers to an HTTP request (an SSH server answers with its banner).
pub const SCRIPT: &str = r#"set -u
server="${ECS_EA_PROBE_SERVER_URL:-}"
materials="${ECS_EA_PROBE_MATERIALS:-}"
if ! command -v curl >/dev/null 2>&1; then echo "probe: the image has no curl"; exit 48; fi
if [ -n "$server" ]; then
  url="${server%/}/admin/latest-agent.status"
  headers="/tmp/ecs-ea-probe-headers.$$"
  code=$(curl -sS -o /dev/null -D "$headers" -w '%{http_code}' --connect-timeout 10 --max-time 30 "$url")
  rc=$?
  case "$rc" in
    0) ;;
    6) echo "probe: $url: the name does not resolve"; exit 41 ;;
    7|28) echo "probe: $url: connection refused or timed out"; exit 42 ;;
    35|51|53|54|58|59|60|77|80|82|83|90|91) echo "probe: $url: TLS failed (curl $rc)"; exit 43 ;;
    *) echo "probe: $url: curl failed ($rc)"; exit 42 ;;
  esac
  case "$code" in
    2??) ;;
    *) echo "probe: $url: HTTP $code"; exit 44 ;;
  esac
  if ! grep -qi '^agent-content-md5:' "$headers"; then echo "probe: $url: not a GoCD server"; exit 45; fi
  echo "probe: $url: a GoCD server"
fi
for material in $materials; do
  host="${material%:*}"
  port="${material##*:}"
  connect=$(curl -sS -o /dev/null -w '%{time_connect}' --connect-timeout 10 --max-time 5 "http://$host:$port/" 2>/dev/null)
  rc=$?
  if [ "$rc" = 6 ]; then echo "probe: material $host: the name does not resolve"; exit 46; fi
  case "$connect" in
    ""|0|0.0|0.00|0.000|0.0000|0.00000|0.000000) echo "probe: material $host:$port: connection refused or timed out"; exit 47 ;;
  esac
  echo "probe: material $host:$port: connected"
done
exit 0
"#;

/// The agent container's command override that runs [`SCRIPT`].
pub fn command() -> Vec<String> {
    vec!["/bin/sh".to_string(), "-c".to_string(), SCRIPT.to_string()]
}

/// The probe's environment for a server URL and material hosts.
pub fn environment(server_url: &str, materials: &[Material]) -> Vec<(String, String)> {
    let hosts: Vec<String> = materials.iter().map(Material::host_port).collect();
    vec![(SERVER_URL_VAR.to_string(), server_url.to_string()), (MATERIALS_VAR.to_string(), hosts.join(" "))]
}

/// A material host to reach: what `--material` named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Material {
    /// The host name or address.
    pub host: String,
    /// The TCP port.
    pub port: u16,
}

impl Material {
    /// `host:port` (`[address]:port` for an IPv6 address, as a URL writes it).
    pub fn host_port(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// A material as a build names it: `git@host:org/repo.git` (SSH, 22), `ssh://[user@]host[:port]/…`,
    /// `git://host[:port]/…` (9418), `https://host[:port]/…` (443), `http://host[:port]/…` (80),
    /// or `host:port`.
    ///
    /// # Errors
    /// What is wrong with it, in words.
    pub fn parse(spec: &str) -> Result<Material, String> {
        let spec = spec.trim();
        let bad = || {
            format!("{spec:?} is not a material (git@host:repo, ssh://, git://, https://, http:// URL, or host:port)")
        };
        if let Some((scheme, rest)) = spec.split_once("://") {
            let default_port = match scheme.to_ascii_lowercase().as_str() {
                "ssh" | "git+ssh" => 22,
                "git" => 9418,
                "https" => 443,
                "http" => 80,
                _ => return Err(bad()),
            };
            let authority = rest.split('/').next().unwrap_or("");
            let host_port = authority.rsplit('@').next().unwrap_or("");
            return host_and_port(host_port, default_port).ok_or_else(bad);
        }
        // scp-like SSH: [user@]host:path (the part after the colon is a path, not a port).
        if let Some((user_host, path)) = spec.split_once(':') {
            if !path.is_empty() && path.parse::<u16>().is_err() {
                let host = user_host.rsplit('@').next().unwrap_or("");
                return valid_host(host).map(|host| Material { host, port: 22 }).ok_or_else(bad);
            }
            let port: u16 = path.parse().map_err(|_| bad())?;
            return valid_host(user_host).map(|host| Material { host, port }).ok_or_else(bad);
        }
        Err(bad())
    }
}

/// `host` or `host:port` (an IPv6 literal in brackets).
fn host_and_port(host_port: &str, default_port: u16) -> Option<Material> {
    if let Some(rest) = host_port.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => default_port,
            None => return None,
        };
        return Some(Material { host: host.to_string(), port });
    }
    let (host, port) = match host_port.rsplit_once(':') {
        Some((host, port)) => (host, port.parse().ok()?),
        None => (host_port, default_port),
    };
    Some(Material { host: valid_host(host)?, port })
}

fn valid_host(host: &str) -> Option<String> {
    let ok = !host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    ok.then(|| host.to_string())
}

/// What the probe's exit status says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The server is a GoCD server, and every material host took a connection.
    Reached,
    /// The server's host name does not resolve.
    ServerName,
    /// The server refused the connection, or it timed out.
    ServerUnreachable,
    /// The server's TLS failed (most often: its certificate is not trusted).
    ServerTls,
    /// The server answered with an HTTP error.
    ServerHttp,
    /// Something answered, not as a GoCD server.
    NotGoCd,
    /// A material host's name does not resolve.
    MaterialName,
    /// A material host refused the connection, or it timed out.
    MaterialUnreachable,
    /// The image has no `curl`.
    NoCurl,
    /// Another status (the shell missing, the container killed, ...).
    Other(i32),
}

impl Outcome {
    /// Every outcome with its exit status, as [`SCRIPT`] uses them.
    pub const STATUSES: [(Outcome, i32); 9] = [
        (Outcome::Reached, 0),
        (Outcome::ServerName, 41),
        (Outcome::ServerUnreachable, 42),
        (Outcome::ServerTls, 43),
        (Outcome::ServerHttp, 44),
        (Outcome::NotGoCd, 45),
        (Outcome::MaterialName, 46),
        (Outcome::MaterialUnreachable, 47),
        (Outcome::NoCurl, 48),
    ];

    /// The outcome of the probe container's exit status.
    pub fn of_exit(status: i32) -> Outcome {
        Outcome::STATUSES.iter().find(|(_, s)| *s == status).map_or(Outcome::Other(status), |(o, _)| *o)
    }

    /// The exit status the script gives this outcome.
    pub fn status(self) -> i32 {
        match self {
            Outcome::Other(status) => status,
            known => Outcome::STATUSES.iter().find(|(o, _)| *o == known).map_or(-1, |(_, s)| *s),
        }
    }

    /// `Ok` when reached; else the failure with its class and fix.
    ///
    /// # Errors
    /// Every outcome but [`Outcome::Reached`].
    pub fn verdict(self, server_url: &str, materials: &[Material]) -> Result<(), Failed> {
        let hosts: Vec<String> = materials.iter().map(Material::host_port).collect();
        let hosts = if hosts.is_empty() { "none given".to_string() } else { hosts.join(", ") };
        let (class, finding, fix) = match self {
            Outcome::Reached => return Ok(()),
            Outcome::ServerName => (
                Class::ServerName,
                format!("the tasks could not resolve the host name of {server_url}"),
                "use a name the VPC resolves (public DNS, or a Route 53 private zone associated with the VPC), or the server's address".to_string(),
            ),
            Outcome::ServerUnreachable => (
                Class::ServerUnreachable,
                format!("the tasks could not connect to {server_url}: refused or timed out"),
                format!(
                    "let the agents' security groups send TCP {port} out, give the subnets a route to the server (NAT gateway, internet gateway with AssignPublicIp, peering), and let the server's firewall in from the NAT's public address or the agents' security group; a stock GoCD server listens on plain HTTP 8153 (http://host:8153/go)",
                    port = server_port(server_url).map_or_else(|| "to the server's port".to_string(), |p| p.to_string())
                ),
            ),
            Outcome::ServerTls => (
                Class::ServerTls,
                format!("TLS with {server_url} failed: the agent image does not trust the server's certificate"),
                "give the agent your CA (AGENT_BOOTSTRAPPER_ARGS=-rootCertFile /path/ca.pem, with the file in the image), or put a publicly trusted certificate on the server's proxy".to_string(),
            ),
            Outcome::ServerHttp => (
                Class::ServerHttp,
                format!("{server_url}/admin/latest-agent.status answered with an HTTP error"),
                "GoServerUrl must be the server's URL ending in /go (http://host:8153/go, or https://host/go behind a proxy)".to_string(),
            ),
            Outcome::NotGoCd => (
                Class::NotGoCd,
                format!("{server_url} answered, but not as a GoCD server (no Agent-Content-MD5 header on /admin/latest-agent.status)"),
                "check the host and port (a stock GoCD server: http://host:8153/go) and what a proxy in front of it serves".to_string(),
            ),
            Outcome::MaterialName => (
                Class::Material,
                format!("the tasks could not resolve a material host ({hosts})"),
                "use a name the VPC resolves".to_string(),
            ),
            Outcome::MaterialUnreachable => (
                Class::Material,
                format!("the tasks could not connect to a material host ({hosts}): refused or timed out"),
                "let the agents' security groups send the material's port out (22 for SSH, 9418 for git://, 80, 443) and give the subnets a route to it".to_string(),
            ),
            Outcome::NoCurl => (
                Class::Failed,
                "the probe needs curl in the image, and the image has none".to_string(),
                "try with an official GoCD agent image (it has curl), or add curl to yours".to_string(),
            ),
            Outcome::Other(status) => (
                Class::Failed,
                format!("the probe ended with exit status {status}"),
                "the image must have /bin/sh and curl; look at the task's stop reason in the ECS console".to_string(),
            ),
        };
        Err(Failed::new(class, finding, fix))
    }
}

/// The TCP port of a URL (`https` 443, `http` 80 unless it names one).
fn server_port(url: &str) -> Option<u16> {
    let (scheme, rest) = url.split_once("://")?;
    let default_port = if scheme.eq_ignore_ascii_case("https") { 443 } else { 80 };
    let authority = rest.split('/').next()?;
    host_and_port(authority.rsplit('@').next()?, default_port).map(|m| m.port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn materials_as_builds_name_them() {
        let m = |s: &str| Material::parse(s).map(|m| m.host_port());
        assert_eq!(m("git@github.com:gocd/gocd.git").unwrap(), "github.com:22");
        assert_eq!(m("ssh://git@git.example.com:2222/org/repo.git").unwrap(), "git.example.com:2222");
        assert_eq!(m("ssh://git.example.com/org/repo").unwrap(), "git.example.com:22");
        assert_eq!(m("git://git.example.com/repo").unwrap(), "git.example.com:9418");
        assert_eq!(m("https://github.com/gocd/gocd.git").unwrap(), "github.com:443");
        assert_eq!(m("http://mirror.example.com:8080/repo").unwrap(), "mirror.example.com:8080");
        assert_eq!(m("svn.example.com:3690").unwrap(), "svn.example.com:3690");
        assert_eq!(m("https://[2001:db8::1]:8443/x").unwrap(), "[2001:db8::1]:8443");
        // scp-like: what follows the colon is a path, as git reads it.
        assert_eq!(m("git.example.com:99999").unwrap(), "git.example.com:22");
        for bad in ["", "github.com", "ftp://x/y", "https://", "a b:22", "https://h:99999/x"] {
            assert!(Material::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_exit_status_maps_back_to_its_outcome() {
        for (outcome, status) in Outcome::STATUSES {
            assert_eq!(Outcome::of_exit(status), outcome);
            assert_eq!(outcome.status(), status);
            assert!(SCRIPT.contains(&format!("exit {status}")), "the script uses {status}");
        }
        assert_eq!(Outcome::of_exit(127), Outcome::Other(127));
    }

    /// A loopback HTTP server: `/go/admin/latest-agent.status` answered as GoCD answers it (with
    /// `gocd`), or as a web server that is not GoCD; any other path 404.
    fn http_server(gocd: bool) -> u16 {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut request = String::new();
                if reader.read_line(&mut request).is_err() {
                    continue;
                }
                let path = request.split_whitespace().nth(1).unwrap_or("");
                let answer = match (path, gocd) {
                    ("/go/admin/latest-agent.status", true) => {
                        "HTTP/1.1 200 OK\r\nAgent-Content-MD5: 0f0e\r\nAgent-Launcher-Content-MD5: 0d0c\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    }
                    (_, false) => "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
                    _ => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                };
                let mut stream = stream;
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        port
    }

    /// A loopback port nothing listens on.
    fn closed_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    }

    /// Runs the script as the task would, with this machine's `sh` and `curl`.
    fn run_script(server: &str, materials: &str) -> i32 {
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(SCRIPT)
            .env(SERVER_URL_VAR, server)
            .env(MATERIALS_VAR, materials)
            .output()
            .expect("sh and curl (the tests need curl, as the GoCD agent images have it)");
        out.status.code().unwrap_or_else(|| panic!("no exit status: {}", String::from_utf8_lossy(&out.stdout)))
    }

    /// The script itself, against real sockets: each exit status of the contract is the one
    /// curl's outcome leads to.
    #[test]
    fn the_script_keeps_its_contract_against_real_servers() {
        let gocd = http_server(true);
        let web = http_server(false);
        let closed = closed_port();
        let status = |server: String, materials: String| Outcome::of_exit(run_script(&server, &materials));
        assert_eq!(status(format!("http://127.0.0.1:{gocd}/go"), String::new()), Outcome::Reached);
        assert_eq!(status(format!("http://127.0.0.1:{gocd}/go/"), format!("127.0.0.1:{web}")), Outcome::Reached);
        assert_eq!(status(format!("http://127.0.0.1:{gocd}/ci/go"), String::new()), Outcome::ServerHttp);
        assert_eq!(status(format!("http://127.0.0.1:{web}/go"), String::new()), Outcome::NotGoCd);
        assert_eq!(status(format!("http://127.0.0.1:{closed}/go"), String::new()), Outcome::ServerUnreachable);
        assert_eq!(status("http://gocd.name.invalid:8153/go".into(), String::new()), Outcome::ServerName);
        assert_eq!(status(format!("https://127.0.0.1:{gocd}/go"), String::new()), Outcome::ServerTls);
        let server = format!("http://127.0.0.1:{gocd}/go");
        assert_eq!(status(server.clone(), format!("127.0.0.1:{closed}")), Outcome::MaterialUnreachable);
        assert_eq!(status(server.clone(), "git.name.invalid:22".into()), Outcome::MaterialName);
        assert_eq!(status(String::new(), format!("127.0.0.1:{web}")), Outcome::Reached);
    }

    #[test]
    fn each_failure_has_its_class() {
        let url = "http://gocd.example.com:8153/go";
        let class = |o: Outcome| o.verdict(url, &[]).unwrap_err().class;
        assert!(Outcome::Reached.verdict(url, &[]).is_ok());
        assert_eq!(class(Outcome::ServerName), Class::ServerName);
        assert_eq!(class(Outcome::ServerUnreachable), Class::ServerUnreachable);
        assert_eq!(class(Outcome::ServerTls), Class::ServerTls);
        assert_eq!(class(Outcome::ServerHttp), Class::ServerHttp);
        assert_eq!(class(Outcome::NotGoCd), Class::NotGoCd);
        assert_eq!(class(Outcome::MaterialUnreachable), Class::Material);
        assert_eq!(class(Outcome::Other(137)), Class::Failed);
        let unreachable = Outcome::ServerUnreachable.verdict(url, &[]).unwrap_err();
        assert!(unreachable.fix.contains("TCP 8153"), "{}", unreachable.fix);
    }
}
