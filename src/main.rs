use gpu_exporter::config::{self, Command};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    let env = |k: &str| std::env::var(k).ok();
    let config = match config::parse_command_line(&argv0, args.collect(), &env) {
        Ok(Command::Run(c)) => c,
        Ok(Command::Help) => {
            print!("{}", config::usage());
            return ExitCode::SUCCESS;
        }
        Ok(Command::Print(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Version) => {
            println!("gpu-exporter {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(e) => return fail(&e.to_string(), 2),
    };
    gpu_exporter::init_logger(config.log_level, config.log_format);
    #[cfg(feature = "deliberate-panic")]
    if std::env::var_os("GPU_EXPORTER_DELIBERATE_PANIC").is_some() {
        panic!("deliberate panic, as GPU_EXPORTER_DELIBERATE_PANIC asks");
    }
    match gpu_exporter::run(*config) {
        Ok(code) => ExitCode::from(code),
        Err(gpu_exporter::Error::Config(e)) => fail(&e.to_string(), 2),
        Err(gpu_exporter::Error::Runtime(e)) => fail(&e, 1),
    }
}

fn fail(msg: &str, code: u8) -> ExitCode {
    eprintln!("gpu-exporter: error: {msg}");
    ExitCode::from(code)
}
