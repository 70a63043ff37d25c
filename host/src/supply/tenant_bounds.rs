//! What a cluster policy holds a tenant's module to (`ZundokoTenantPolicy`): apart from
//! `tenant.rs`, which the shares, the cache and the registry read, so that those stay below
//! what this reads (the keys, the budget section, a fetch's problem).

/// The reason of every refusal a tenant policy's field makes (its message names the policy
/// and the field).
pub const POLICY_REFUSED: &str = "PolicyRefused";

/// What a cluster policy (`ZundokoTenantPolicy`) holds a tenant's module to, beyond its rule
/// set's spec: the keys that must sign it (each beside the rule set's own and the operator's),
/// and the ceilings of what it runs and compiles with. Made by the rule set controller from
/// the policy selecting the tenant's namespace; a cluster rule set has none.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantBounds {
    /// The policy's name, for the refusals.
    pub policy: String,
    pub required_keys: Vec<crate::supply::oci::TrustedKey>,
    pub fuel: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub module_bytes: Option<u64>,
    pub compile_memory_bytes: Option<u64>,
    pub compile_time: Option<std::time::Duration>,
    /// A followed tag is resolved again at most this often.
    pub min_poll: Option<std::time::Duration>,
}

impl TenantBounds {
    /// A refusal by the policy's `field`.
    pub fn refused(&self, field: &str, why: String) -> crate::supply::fetch::Problem {
        crate::supply::fetch::Problem::new(POLICY_REFUSED, format!("ZundokoTenantPolicy {} {field}: {why}", self.policy), false)
    }

    /// Whether a module's bytes are within the ceilings: its size, and the fuel and memory per
    /// call it would run with (its `zundoko:budget` section's, or the operator's defaults
    /// `defaults` when it asks for none). A budget the operator itself would refuse is left to
    /// the loader to refuse, as any module's.
    pub fn admit(&self, bytes: &[u8], defaults: &crate::supply::sandbox::SandboxLimits) -> Result<(), crate::supply::fetch::Problem> {
        use crate::supply::sandbox::budget;
        if let Some(ceiling) = self.module_bytes
            && bytes.len() as u64 > ceiling
        {
            return Err(self.refused("spec.ceilings.moduleMiB", format!("the module is {} bytes, over the ceiling of {ceiling}", bytes.len())));
        }
        let Ok(granted) = budget::read(bytes).and_then(|asked| budget::grant(asked, defaults)) else { return Ok(()) };
        if let Some(ceiling) = self.fuel
            && granted.fuel > ceiling
        {
            return Err(self.refused("spec.ceilings.fuel", format!("the module runs with {} fuel per call (its zundoko:budget section, or the operator's default), over the ceiling of {ceiling}", granted.fuel)));
        }
        if let Some(ceiling) = self.memory_bytes
            && granted.memory_bytes as u64 > ceiling
        {
            return Err(self.refused(
                "spec.ceilings.memoryMiB",
                format!("the module runs with {} MiB of memory per call (its zundoko:budget section, or the operator's default), over the ceiling of {} MiB", granted.memory_bytes >> 20, ceiling >> 20),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_over_any_ceiling_of_its_policy_is_refused_naming_the_field() {
        let bounds = TenantBounds { policy: "p".into(), required_keys: Vec::new(), fuel: None, memory_bytes: None, module_bytes: None, compile_memory_bytes: None, compile_time: None, min_poll: None };
        let defaults = crate::supply::sandbox::SandboxLimits::default();
        // No budget section: the operator's defaults are what it runs with.
        let module = vec![0u8; 2 << 20];
        assert!(bounds.admit(&module, &defaults).is_ok());
        let refusal = |b: TenantBounds| b.admit(&module, &defaults).unwrap_err();
        let big = refusal(TenantBounds { module_bytes: Some(1 << 20), ..bounds.clone() });
        assert_eq!(big.reason, POLICY_REFUSED);
        assert!(big.message.starts_with("ZundokoTenantPolicy p spec.ceilings.moduleMiB: the module is 2097152 bytes"), "{}", big.message);
        let fuel = refusal(TenantBounds { fuel: Some(defaults.fuel - 1), ..bounds.clone() });
        assert!(fuel.message.starts_with("ZundokoTenantPolicy p spec.ceilings.fuel: "), "{}", fuel.message);
        let memory = refusal(TenantBounds { memory_bytes: Some(defaults.memory_bytes as u64 - 1), ..bounds.clone() });
        assert!(memory.message.starts_with("ZundokoTenantPolicy p spec.ceilings.memoryMiB: "), "{}", memory.message);
        let at_the_ceilings = TenantBounds { fuel: Some(defaults.fuel), memory_bytes: Some(defaults.memory_bytes as u64), module_bytes: Some(2 << 20), ..bounds };
        assert!(at_the_ceilings.admit(&module, &defaults).is_ok());
    }
}
