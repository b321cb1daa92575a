fn main() -> std::process::ExitCode {
    use examples::reach as r;
    examples::main_with("reach", r::FLAGS, r::USAGE, r::run)
}
