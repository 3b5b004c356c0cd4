// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;

/// @title did:ethr registry
/// @notice Compatible with ERC-1056 (EthereumDIDRegistry): same storage getters, functions,
/// signed-message layout and events, so standard did:ethr resolvers work against it. Every
/// address is an identity that owns itself until it names another owner.
/// @dev Differences that do not touch compatibility: custom errors instead of bare reverts, and
/// a signature that recovers to the zero address is refused (otherwise anyone could act for
/// the zero identity, whose default owner is the zero address).
contract DIDRegistry {
    mapping(address identity => address owner) public owners;
    /// @dev Keyed by keccak256(delegateType) as in ERC-1056; the value is the valid-until time.
    mapping(address identity => mapping(bytes32 typeHash => mapping(address delegate => uint256 validTo)))
        public delegates;
    /// @notice Block number of the identity's latest change; resolvers walk events backwards
    /// from here through each event's `previousChange`.
    mapping(address identity => uint256 blockNumber) public changed;
    /// @notice Per signer; binds each signed message to one use.
    mapping(address signer => uint256) public nonce;

    event DIDOwnerChanged(address indexed identity, address owner, uint256 previousChange);
    event DIDDelegateChanged(
        address indexed identity, bytes32 delegateType, address delegate, uint256 validTo, uint256 previousChange
    );
    event DIDAttributeChanged(
        address indexed identity, bytes32 name, bytes value, uint256 validTo, uint256 previousChange
    );

    error NotIdentityOwner(address identity, address actor);
    error InvalidSignature();
    error ValidityTooLong();

    modifier onlyOwner(address identity, address actor) {
        if (actor != identityOwner(identity)) revert NotIdentityOwner(identity, actor);
        _;
    }

    function identityOwner(address identity) public view returns (address) {
        address o = owners[identity];
        return o == address(0) ? identity : o;
    }

    function validDelegate(address identity, bytes32 delegateType, address delegate) public view returns (bool) {
        return delegates[identity][keccak256(abi.encodePacked(delegateType))][delegate] > block.timestamp;
    }

    // ---- owner ----

    function changeOwner(address identity, address newOwner) public {
        _changeOwner(identity, msg.sender, newOwner);
    }

    function changeOwnerSigned(address identity, uint8 sigV, bytes32 sigR, bytes32 sigS, address newOwner) public {
        bytes32 digest = _digest(identity, abi.encodePacked("changeOwner", newOwner));
        _changeOwner(identity, _signer(identity, sigV, sigR, sigS, digest), newOwner);
    }

    // ---- delegates ----

    function addDelegate(address identity, bytes32 delegateType, address delegate, uint256 validity) public {
        _addDelegate(identity, msg.sender, delegateType, delegate, validity);
    }

    function addDelegateSigned(
        address identity,
        uint8 sigV,
        bytes32 sigR,
        bytes32 sigS,
        bytes32 delegateType,
        address delegate,
        uint256 validity
    ) public {
        bytes32 digest = _digest(identity, abi.encodePacked("addDelegate", delegateType, delegate, validity));
        _addDelegate(identity, _signer(identity, sigV, sigR, sigS, digest), delegateType, delegate, validity);
    }

    function revokeDelegate(address identity, bytes32 delegateType, address delegate) public {
        _revokeDelegate(identity, msg.sender, delegateType, delegate);
    }

    function revokeDelegateSigned(
        address identity,
        uint8 sigV,
        bytes32 sigR,
        bytes32 sigS,
        bytes32 delegateType,
        address delegate
    ) public {
        bytes32 digest = _digest(identity, abi.encodePacked("revokeDelegate", delegateType, delegate));
        _revokeDelegate(identity, _signer(identity, sigV, sigR, sigS, digest), delegateType, delegate);
    }

    // ---- attributes (kept in events only, as in ERC-1056) ----

    function setAttribute(address identity, bytes32 name, bytes memory value, uint256 validity) public {
        _setAttribute(identity, msg.sender, name, value, validity);
    }

    function setAttributeSigned(
        address identity,
        uint8 sigV,
        bytes32 sigR,
        bytes32 sigS,
        bytes32 name,
        bytes memory value,
        uint256 validity
    ) public {
        bytes32 digest = _digest(identity, abi.encodePacked("setAttribute", name, value, validity));
        _setAttribute(identity, _signer(identity, sigV, sigR, sigS, digest), name, value, validity);
    }

    function revokeAttribute(address identity, bytes32 name, bytes memory value) public {
        _revokeAttribute(identity, msg.sender, name, value);
    }

    function revokeAttributeSigned(
        address identity,
        uint8 sigV,
        bytes32 sigR,
        bytes32 sigS,
        bytes32 name,
        bytes memory value
    ) public {
        bytes32 digest = _digest(identity, abi.encodePacked("revokeAttribute", name, value));
        _revokeAttribute(identity, _signer(identity, sigV, sigR, sigS, digest), name, value);
    }

    // ---- internals ----

    function _changeOwner(address identity, address actor, address newOwner) private onlyOwner(identity, actor) {
        owners[identity] = newOwner;
        emit DIDOwnerChanged(identity, newOwner, changed[identity]);
        changed[identity] = block.number;
    }

    function _addDelegate(address identity, address actor, bytes32 delegateType, address delegate, uint256 validity)
        private
        onlyOwner(identity, actor)
    {
        uint256 validTo = _until(validity);
        delegates[identity][keccak256(abi.encodePacked(delegateType))][delegate] = validTo;
        emit DIDDelegateChanged(identity, delegateType, delegate, validTo, changed[identity]);
        changed[identity] = block.number;
    }

    function _revokeDelegate(address identity, address actor, bytes32 delegateType, address delegate)
        private
        onlyOwner(identity, actor)
    {
        // "Valid until now" is already invalid: validDelegate needs validTo > block.timestamp.
        delegates[identity][keccak256(abi.encodePacked(delegateType))][delegate] = block.timestamp;
        emit DIDDelegateChanged(identity, delegateType, delegate, block.timestamp, changed[identity]);
        changed[identity] = block.number;
    }

    function _setAttribute(address identity, address actor, bytes32 name, bytes memory value, uint256 validity)
        private
        onlyOwner(identity, actor)
    {
        emit DIDAttributeChanged(identity, name, value, _until(validity), changed[identity]);
        changed[identity] = block.number;
    }

    function _revokeAttribute(address identity, address actor, bytes32 name, bytes memory value)
        private
        onlyOwner(identity, actor)
    {
        emit DIDAttributeChanged(identity, name, value, 0, changed[identity]);
        changed[identity] = block.number;
    }

    /// @dev ERC-1056 layout: 0x19 0x00, this contract, the current owner's nonce, the identity,
    /// then the operation name and its arguments, all tightly packed.
    function _digest(address identity, bytes memory operation) private view returns (bytes32) {
        return keccak256(
            abi.encodePacked(bytes1(0x19), bytes1(0), address(this), nonce[identityOwner(identity)], identity, operation)
        );
    }

    function _signer(address identity, uint8 v, bytes32 r, bytes32 s, bytes32 digest) private returns (address) {
        address signer = ecrecover(digest, v, r, s);
        if (signer == address(0) || signer != identityOwner(identity)) revert InvalidSignature();
        nonce[signer] += 1;
        return signer;
    }

    function _until(uint256 validity) private view returns (uint256) {
        if (validity > type(uint256).max - block.timestamp) revert ValidityTooLong();
        return block.timestamp + validity;
    }
}
