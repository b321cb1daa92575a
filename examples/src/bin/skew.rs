fn main() -> std::process::ExitCode {
    use examples::skew as s;
    examples::main_with("skew", s::FLAGS, s::USAGE, s::run)
}
